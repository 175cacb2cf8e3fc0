package eventstoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// subscription runs SubscribeAll on its own goroutine and hands over the test's own events.
type subscription struct {
	cancel context.CancelFunc
	events chan eventstore.RecordedEvent
	end    chan error // the error the subscription ended with
	ended  bool
	err    error
}

// errNoError stands for a subscription that ended without an error, which it must never do.
var errNoError = errors.New("the subscription ended without an error")

// subscribe subscribes with a context cancelled by stop or at the end of the test.
func (f *fixture) subscribe(t *testing.T, opts eventstore.SubscribeOptions) *subscription {
	t.Helper()
	return f.subscribeCtx(t, t.Context(), opts)
}

func (f *fixture) subscribeCtx(t *testing.T, ctx context.Context, opts eventstore.SubscribeOptions) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{
		cancel: cancel,
		events: make(chan eventstore.RecordedEvent),
		end:    make(chan error, 1),
	}
	go func() {
		for e, err := range f.b.SubscribeAll(ctx, opts) {
			if err != nil {
				sub.end <- err
				return
			}
			if !strings.HasPrefix(e.Stream, f.prefix) {
				continue // another test's, in a store they share
			}
			select {
			case sub.events <- e:
			case <-ctx.Done(): // nobody is listening any more: wait for the context's error
			}
		}
		sub.end <- errNoError
	}()
	t.Cleanup(func() {
		if sub.ended {
			return
		}
		cancel()
		select {
		case <-sub.end:
		case <-time.After(patience):
			t.Errorf("a subscription did not end within %v of cancelling its context", patience)
		}
	})
	return sub
}

// next waits for the subscription's next event.
func (s *subscription) next(t *testing.T) eventstore.RecordedEvent {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case err := <-s.end:
		s.ended, s.err = true, err
		t.Fatalf("the subscription ended while an event was due: %v", err)
	case <-time.After(patience):
		t.Fatalf("no event from the subscription within %v", patience)
	}
	panic("unreachable")
}

// take waits for the subscription's next n events.
func (s *subscription) take(t *testing.T, n int) []eventstore.RecordedEvent {
	t.Helper()
	events := make([]eventstore.RecordedEvent, n)
	for i := range events {
		events[i] = s.next(t)
	}
	return events
}

// wait waits for the subscription to end and returns its error.
func (s *subscription) wait(t *testing.T) error {
	t.Helper()
	if s.ended {
		return s.err
	}
	for {
		select {
		case <-s.events: // yielded before it noticed; what it yields is checked elsewhere
		case err := <-s.end:
			s.ended, s.err = true, err
			return err
		case <-time.After(patience):
			t.Fatalf("the subscription did not end within %v", patience)
		}
	}
}

// stop cancels the subscription's context and returns the error it ended with.
func (s *subscription) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	return s.wait(t)
}

// wantNextIs appends one event to stream and checks that it is the subscription's next event:
// whatever the subscription held back before it shows up instead.
func (f *fixture) wantNextIs(t *testing.T, sub *subscription, stream string) {
	t.Helper()
	marker := NewEvents(1)
	f.append(t, stream, eventstore.Any, marker...)
	if e := sub.next(t); e.ID != marker[0].ID {
		t.Errorf("the subscription yielded %s@%d (%s), want the event just appended to %s", e.Stream, e.Revision, e.ID, stream)
	}
}

func testReadAllInCommitOrder(t *testing.T, s *suite) {
	f := s.setup(t)
	// Given appends of one to three events to four streams in turn, one after the other,
	var want []ref
	next := map[string]uint64{}
	for i := range 12 {
		stream := f.stream(fmt.Sprintf("s%d", i%4))
		events := NewEvents(1 + i%3)
		f.append(t, stream, eventstore.Any, events...)
		want = append(want, refsFor(stream, next[stream], events...)...)
		next[stream] += uint64(len(events))
	}

	// when the log is read from the start,
	log := f.log(t)

	// then it holds the events in the order they were appended,
	if diff := cmp.Diff(want, refsOf(log)); diff != "" {
		t.Fatalf("log (-want +got):\n%s", diff)
	}
	wantIncreasing(t, "log", log)

	// each exactly as its stream holds it.
	var fromStreams []eventstore.RecordedEvent
	for i := range 4 {
		fromStreams = append(fromStreams, f.read(t, f.stream(fmt.Sprintf("s%d", i)), eventstore.ReadStreamOptions{})...)
	}
	byID := map[uuid.UUID]eventstore.RecordedEvent{}
	for _, e := range fromStreams {
		byID[e.ID] = e
	}
	for _, e := range log {
		if diff := cmp.Diff(byID[e.ID], e, equalRecorded); diff != "" {
			t.Errorf("event %s (-stream +log):\n%s", e.ID, diff)
		}
	}
}

func testReadAllFromAndLimit(t *testing.T, s *suite) {
	f := s.setup(t)
	// Given eight events in two streams,
	a, b := f.stream("a"), f.stream("b")
	f.append(t, a, eventstore.NoStream, NewEvents(3)...)
	f.append(t, b, eventstore.NoStream, NewEvents(2)...)
	f.append(t, a, eventstore.Exact(2), NewEvents(3)...)
	read := f.log(t)
	log := refsOf(read)
	if len(log) != 8 {
		t.Fatalf("the log has %d events, want 8", len(log))
	}
	pos := func(i int) eventstore.Position { return read[i].Position }

	cases := []struct {
		name string
		opts eventstore.ReadAllOptions
		want []ref
	}{
		{"FromStart", eventstore.ReadAllOptions{From: eventstore.Start}, log},
		{"FromFourth", eventstore.ReadAllOptions{From: pos(3)}, log[3:]},
		{"FromLast", eventstore.ReadAllOptions{From: pos(7)}, log[7:]},
		{"Limit3", eventstore.ReadAllOptions{Limit: 3}, log[:3]},
		{"FromThirdLimit2", eventstore.ReadAllOptions{From: pos(2), Limit: 2}, log[2:4]},
		{"LimitBeyondEnd", eventstore.ReadAllOptions{From: pos(5), Limit: 100}, log[5:]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// When the log is read from a position (inclusive) with a limit, then it yields
			// those events.
			c.opts.Filter = f.own()
			got, err := collect(t, f.b.ReadAll(t.Context(), c.opts))
			if err != nil {
				t.Fatalf("read all %+v: %v", c.opts, err)
			}
			if diff := cmp.Diff(c.want, refsOf(got)); diff != "" {
				t.Errorf("read all from %v, limit %d (-want +got):\n%s", c.opts.From, c.opts.Limit, diff)
			}
		})
	}
}

func testHead(t *testing.T, s *suite) {
	f := s.setup(t)
	ctx := t.Context()
	before, err := f.b.Head(ctx)
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	// A Head other than Start must be an event's position.
	if before != eventstore.Start {
		wantEventAt(t, f.b, before)
	}

	// Given appends,
	first := NewEvents(3)
	f.append(t, f.stream("a"), eventstore.NoStream, first...)
	last := f.append(t, f.stream("b"), eventstore.NoStream, NewEvents(2)...)

	// when Head is asked for,
	head, err := f.b.Head(ctx)
	if err != nil {
		t.Fatalf("Head: %v", err)
	}

	// then it is the position of the last event in the log: the last append's, unless other
	// writers share the store.
	if before == eventstore.Start && head != last.Position {
		t.Errorf("Head = %v, want %v, the last append's position", head, last.Position)
	}
	if head.Compare(last.Position) < 0 {
		t.Errorf("Head = %v, before the last append's position %v", head, last.Position)
	}
	wantEventAt(t, f.b, head)

	// A repeat of the first append writes nothing and leaves Head where it was.
	MustAppend(t, f.b, f.stream("a"), eventstore.NoStream, first...)
	if again, err := f.b.Head(ctx); err != nil || again.Compare(head) < 0 {
		t.Errorf("Head after a repeat = %v, %v; want it not before %v", again, err, head)
	}
}

// wantEventAt checks that the log has an event at pos.
func wantEventAt(t *testing.T, b Backend, pos eventstore.Position) {
	t.Helper()
	events, err := collect(t, b.ReadAll(t.Context(), eventstore.ReadAllOptions{From: pos, Limit: 1}))
	if err != nil {
		t.Fatalf("read all from %v: %v", pos, err)
	}
	if len(events) != 1 || events[0].Position != pos {
		t.Errorf("Head is %v, but the log holds no event there (read from it: %v)", pos, refsOf(events))
	}
}

func testFilter(t *testing.T, s *suite) {
	// filters are built from the test's prefix p.
	filters := []struct {
		name   string
		filter func(p string) eventstore.Filter
	}{
		{"Prefix", func(p string) eventstore.Filter {
			return eventstore.Filter{StreamPrefixes: []string{p + "keep-"}}
		}},
		{"PrefixAndExclude", func(p string) eventstore.Filter {
			return eventstore.Filter{StreamPrefixes: []string{p}, ExcludeStreamPrefixes: []string{p + "drop-"}}
		}},
		{"TwoPrefixes", func(p string) eventstore.Filter {
			return eventstore.Filter{StreamPrefixes: []string{p + "keep-a", p + "other-"}}
		}},
		{"ExcludeOnly", func(p string) eventstore.Filter {
			return eventstore.Filter{ExcludeStreamPrefixes: []string{p + "drop-", p + "keep-"}}
		}},
	}
	// seed appends to streams of four names in turn and returns what the filter selects.
	seed := func(t *testing.T, f *fixture, filter eventstore.Filter) []ref {
		t.Helper()
		var want []ref
		next := map[string]uint64{}
		for i := range 12 {
			stream := f.stream([]string{"keep-a", "drop-c", "keep-b", "other-d"}[i%4])
			events := NewEvents(1 + i%2)
			f.append(t, stream, eventstore.Any, events...)
			if filter.Match(stream) {
				want = append(want, refsFor(stream, next[stream], events...)...)
			}
			next[stream] += uint64(len(events))
		}
		if len(want) == 0 {
			t.Fatal("suite bug: the filter selects nothing")
		}
		return want
	}

	for _, c := range filters {
		t.Run("ReadAll/"+c.name, func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			filter := c.filter(f.prefix)
			// Given streams of several names,
			want := seed(t, f, filter)

			// when the log is read through a filter,
			got, err := collect(t, f.b.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: filter}))
			if err != nil {
				t.Fatalf("read all: %v", err)
			}

			// then it yields the events of the streams the filter selects, in order.
			if diff := cmp.Diff(want, refsOf(f.ownOnly(got))); diff != "" {
				t.Errorf("read all %+v (-want +got):\n%s", filter, diff)
			}
		})
		t.Run("SubscribeAll/"+c.name, func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			filter := c.filter(f.prefix)
			want := seed(t, f, filter)

			// When the log is subscribed to through a filter,
			sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: filter})

			// then it yields the events of the streams the filter selects, in order,
			if diff := cmp.Diff(want, refsOf(sub.take(t, len(want)))); diff != "" {
				t.Errorf("subscribe %+v (-want +got):\n%s", filter, diff)
			}
			// and nothing else, live either.
			f.append(t, f.stream("drop-c"), eventstore.Any, NewEvents(1)...)
			f.wantNextIs(t, sub, want[0].Stream)
		})
	}
}

// ownOnly drops other tests' events, for reads of a store they may share.
func (f *fixture) ownOnly(events []eventstore.RecordedEvent) []eventstore.RecordedEvent {
	var own []eventstore.RecordedEvent
	for _, e := range events {
		if strings.HasPrefix(e.Stream, f.prefix) {
			own = append(own, e)
		}
	}
	return own
}

func testSubscribeCatchUpThenLive(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given events in the log,
	backlog := NewEvents(5)
	f.append(t, stream, eventstore.NoStream, backlog[:2]...)
	f.append(t, stream, eventstore.Exact(1), backlog[2:]...)

	// when the log is subscribed to from the start,
	sub := f.subscribe(t, eventstore.SubscribeOptions{After: eventstore.Start, Filter: f.own()})

	// then it yields those events,
	if diff := cmp.Diff(refsFor(stream, 0, backlog...), refsOf(sub.take(t, 5))); diff != "" {
		t.Errorf("backlog (-want +got):\n%s", diff)
	}
	// then those appended afterwards, as they come,
	live := NewEvents(3)
	f.append(t, stream, eventstore.Exact(4), live[0])
	if e := sub.next(t); e.ID != live[0].ID || e.Revision != 5 {
		t.Errorf("live event %s@%d (%s), want revision 5 (%s)", e.Stream, e.Revision, e.ID, live[0].ID)
	}
	f.append(t, stream, eventstore.Exact(5), live[1:]...)
	if diff := cmp.Diff(refsFor(stream, 6, live[1:]...), refsOf(sub.take(t, 2))); diff != "" {
		t.Errorf("live events (-want +got):\n%s", diff)
	}
	// and it ends with the context's error when that is cancelled.
	if err := sub.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("the subscription ended with %v, want an error matching context.Canceled", err)
	}
}

func testSubscribeAfterIsExclusive(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given six events in the log,
	events := NewEvents(7)
	f.append(t, stream, eventstore.NoStream, events[:6]...)
	read := f.read(t, stream, eventstore.ReadStreamOptions{})

	// when the log is subscribed to after the third,
	sub := f.subscribe(t, eventstore.SubscribeOptions{After: read[2].Position, Filter: f.own()})

	// then it yields the events after it, then new ones.
	if diff := cmp.Diff(refsFor(stream, 3, events[3:6]...), refsOf(sub.take(t, 3))); diff != "" {
		t.Errorf("after %v (-want +got):\n%s", read[2].Position, diff)
	}
	f.append(t, stream, eventstore.Exact(5), events[6])
	if e := sub.next(t); e.ID != events[6].ID {
		t.Errorf("live event %s@%d, want revision 6", e.Stream, e.Revision)
	}

	// A subscription after the last event yields only new ones.
	last := f.read(t, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1})[0]
	tail := f.subscribe(t, eventstore.SubscribeOptions{After: last.Position, Filter: f.own()})
	f.wantNextIs(t, tail, stream)
}

func testSubscribeWhileWritersAppend(t *testing.T, s *suite) {
	f := s.setup(t)
	const writers, perWriter = 8, 200
	// Given events already in the log,
	backlog := f.stream("backlog")
	committed := map[uuid.UUID]bool{}
	for _, e := range NewEvents(20) {
		f.append(t, backlog, eventstore.Any, e)
		committed[e.ID] = true
	}

	// when the log is subscribed to from the start while 8 writers append 200 events each
	// to their own streams, one to three at a time,
	sub := f.subscribe(t, eventstore.SubscribeOptions{After: eventstore.Start, Filter: f.own()})
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			stream := f.stream(fmt.Sprintf("writer-%d", w))
			expected := eventstore.NoStream
			for written := 0; written < perWriter; {
				events := NewEvents(min(1+(w+written)%3, perWriter-written))
				res, err := f.b.Append(t.Context(), stream, expected, events...)
				if err != nil {
					t.Errorf("writer %d: append at %v: %v", w, expected, err)
					return
				}
				mu.Lock()
				for _, e := range events {
					committed[e.ID] = true
				}
				mu.Unlock()
				expected = eventstore.Exact(res.Revision)
				written += len(events)
			}
		})
	}
	close(start)
	writing := make(chan struct{})
	go func() {
		wg.Wait()
		close(writing)
	}()

	var got []eventstore.RecordedEvent
	for want := -1; want < 0 || len(got) < want; {
		select {
		case e := <-sub.events:
			got = append(got, e)
		case <-writing:
			writing = nil
			mu.Lock()
			want = len(committed)
			mu.Unlock()
		case err := <-sub.end:
			sub.ended = true
			t.Fatalf("the subscription ended after %d events: %v", len(got), err)
		case <-time.After(patience):
			t.Fatalf("the subscription stalled after %d events (writers done: %v)", len(got), writing == nil)
		}
	}
	// and one more event follows (so that any duplicate held back shows up before it),
	f.wantNextIs(t, sub, backlog)
	if err := sub.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("the subscription ended with %v, want an error matching context.Canceled", err)
	}

	// then it yielded every committed event exactly once,
	var gotIDs, wantIDs []string
	for _, e := range got {
		gotIDs = append(gotIDs, e.ID.String())
	}
	for id := range committed {
		wantIDs = append(wantIDs, id.String())
	}
	if diff := cmp.Diff(sorted(wantIDs), sorted(gotIDs)); diff != "" {
		t.Errorf("event ids received, compared to those appended (-appended +received):\n%s", diff)
	}
	// in log order, each stream in revision order,
	wantIncreasing(t, "subscription", got)
	next := map[string]uint64{}
	for _, e := range got {
		if e.Revision != next[e.Stream] {
			t.Errorf("%s: revision %d after %d", e.Stream, e.Revision, int64(next[e.Stream])-1)
		}
		next[e.Stream] = e.Revision + 1
	}
	// and exactly as the log holds them.
	log := f.log(t)
	if diff := cmp.Diff(log[:len(log)-1], got, equalRecorded); diff != "" {
		t.Errorf("subscription, compared to the log (-log +subscription):\n%s", diff)
	}
}

func testSubscriptionEndsWithContext(t *testing.T, s *suite) {
	t.Run("WhileWaiting", func(t *testing.T) {
		t.Parallel()
		f := s.setup(t)
		// Given a subscription with nothing to yield, when its context is cancelled, then it
		// ends with the context's error.
		sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: f.own()})
		if err := sub.stop(t); !errors.Is(err, context.Canceled) {
			t.Errorf("the subscription ended with %v, want an error matching context.Canceled", err)
		}
	})
	t.Run("AfterCatchingUp", func(t *testing.T) {
		t.Parallel()
		f := s.setup(t)
		stream := f.stream("s")
		f.append(t, stream, eventstore.NoStream, NewEvents(3)...)
		sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: f.own()})
		sub.take(t, 3)
		f.wantNextIs(t, sub, stream)
		if err := sub.stop(t); !errors.Is(err, context.Canceled) {
			t.Errorf("the subscription ended with %v, want an error matching context.Canceled", err)
		}
	})
	t.Run("DuringCatchUp", func(t *testing.T) {
		t.Parallel()
		f := s.setup(t)
		// Given a subscription with a backlog nobody reads,
		f.append(t, f.stream("s"), eventstore.NoStream, NewEvents(50)...)
		sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: f.own()})
		sub.next(t)
		// when its context is cancelled, then it ends with the context's error.
		if err := sub.stop(t); !errors.Is(err, context.Canceled) {
			t.Errorf("the subscription ended with %v, want an error matching context.Canceled", err)
		}
	})
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
