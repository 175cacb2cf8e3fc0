package eventstoretest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// streamState is the state a test puts a stream in before acting on it.
type streamState int

const (
	missing  streamState = iota // never written
	existing                    // revisions 0..2
	deleted                     // revisions 0..2, then deleted
	expired                     // revisions 0..2, all past the stream's maximum age
)

func (s streamState) String() string {
	return [...]string{"Missing", "Existing", "Deleted", "Expired"}[s]
}

// give puts stream in state and returns the events it then holds.
func (f *fixture) give(t *testing.T, stream string, state streamState) []eventstore.EventData {
	t.Helper()
	if state == missing {
		return nil
	}
	events := NewEvents(3)
	if state == expired {
		f.write(t, eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream, Events: events, MaxAge: shortAge})
		f.waitExpired(t, stream)
		return nil
	}
	f.append(t, stream, eventstore.NoStream, events...)
	if state == deleted {
		if err := f.b.DeleteStream(t.Context(), stream, eventstore.Exact(2)); err != nil {
			t.Fatalf("delete %q: %v", stream, err)
		}
		return nil
	}
	return events
}

// nextRevision is the revision the next event appended to a stream in state gets.
func (s streamState) nextRevision() uint64 {
	if s == missing {
		return 0
	}
	return 3
}

// readsFrom is the first revision a stream in state reads from once appended to: a deleted or
// expired stream's events are gone, and the new ones go on after their revisions.
func (s streamState) readsFrom() uint64 {
	if s == deleted || s == expired {
		return s.nextRevision()
	}
	return 0
}

// expectedRevisionCases are the expected revisions an append or a delete is checked against,
// on a stream in each state, whether the check fails, and the Actual its error names. A
// deleted or expired stream is NoStream for the check, and its revisions go on after 2.
var expectedRevisionCases = func() []expectedRevisionCase {
	noStream, exact := eventstore.NoStream, eventstore.Exact
	return []expectedRevisionCase{
		{"Any", missing, eventstore.Any, false, noStream},
		{"NoStream", missing, noStream, false, noStream},
		{"StreamExists", missing, eventstore.StreamExists, true, noStream},
		{"Exact(0)", missing, exact(0), true, noStream},

		{"Any", existing, eventstore.Any, false, noStream},
		{"NoStream", existing, noStream, true, exact(2)},
		{"StreamExists", existing, eventstore.StreamExists, false, noStream},
		{"Exact(2)", existing, exact(2), false, noStream},
		{"Exact(1)", existing, exact(1), true, exact(2)},
		{"Exact(3)", existing, exact(3), true, exact(2)},

		{"Any", deleted, eventstore.Any, false, noStream},
		{"NoStream", deleted, noStream, false, noStream},
		{"StreamExists", deleted, eventstore.StreamExists, true, noStream},
		{"Exact(2)", deleted, exact(2), true, noStream},
		{"Exact(0)", deleted, exact(0), true, noStream},

		{"Any", expired, eventstore.Any, false, noStream},
		{"NoStream", expired, noStream, false, noStream},
		{"StreamExists", expired, eventstore.StreamExists, true, noStream},
		{"Exact(2)", expired, exact(2), true, noStream},
		{"Exact(0)", expired, exact(0), true, noStream},
	}
}()

type expectedRevisionCase struct {
	name     string
	given    streamState
	expected eventstore.ExpectedRevision
	fails    bool
	actual   eventstore.ExpectedRevision // the error's Actual, when it fails
}

func testAppendExpectedRevision(t *testing.T, s *suite) {
	cases := expectedRevisionCases
	for _, c := range cases {
		row := c.given.String() + "/" + c.name
		if s.notRun(t, "Append/ExpectedRevision/"+row) {
			continue
		}
		t.Run(row, func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			stream := f.stream("s")
			// Given a stream in the state,
			before := f.give(t, stream, c.given)

			// when two events are appended at the expected revision,
			events := NewEvents(2)
			res, err := f.b.Append(t.Context(), stream, c.expected, events...)

			// then they land after the stream's last revision, or nothing changes.
			if c.fails {
				wantWrongExpected(t, err, stream, c.expected, c.actual)
				if c.given == existing {
					f.wantStream(t, stream, 0, before...)
				} else {
					f.wantNotFound(t, stream)
				}
				return
			}
			if err != nil {
				t.Fatalf("append at %v to a %s stream: %v", c.expected, c.given, err)
			}
			first := c.given.nextRevision()
			if res.Revision != first+1 {
				t.Errorf("AppendResult.Revision = %d, want %d", res.Revision, first+1)
			}
			if c.given == existing {
				f.wantStream(t, stream, 0, append(before, events...)...)
			} else {
				f.wantStream(t, stream, first, events...)
			}
		})
	}
}

// Deleting a missing stream with Any or NoStream does nothing and succeeds.
func testDeleteExpectedRevision(t *testing.T, s *suite) {
	cases := expectedRevisionCases
	for _, c := range cases {
		row := c.given.String() + "/" + c.name
		if s.notRun(t, "DeleteStream/ExpectedRevision/"+row) {
			continue
		}
		t.Run(row, func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			stream := f.stream("s")
			// Given a stream in the state,
			before := f.give(t, stream, c.given)

			// when it is deleted at the expected revision,
			err := f.b.DeleteStream(t.Context(), stream, c.expected)

			// then it is gone (or still there, when the delete fails),
			if c.fails {
				wantWrongExpected(t, err, stream, c.expected, c.actual)
			} else if err != nil {
				t.Fatalf("delete a %s stream at %v: %v", c.given, c.expected, err)
			}
			if c.fails && c.given == existing {
				f.wantStream(t, stream, 0, before...)
				return
			}
			f.wantNotFound(t, stream)

			// and appending to it again goes on after the revisions it ever had.
			events := NewEvents(1)
			res := f.append(t, stream, eventstore.NoStream, events...)
			if want := c.given.nextRevision(); res.Revision != want {
				t.Errorf("append after the delete: revision %d, want %d", res.Revision, want)
			}
			f.wantStream(t, stream, c.given.nextRevision(), events...)
		})
	}
}

func testRevisionsAndPositions(t *testing.T, s *suite) {
	f := s.setup(t)
	a, b := f.stream("a"), f.stream("b")

	// Given appends of several events to two streams, in turn,
	a1, b1, a2, b2 := NewEvents(3), NewEvents(1), NewEvents(2), NewEvents(2)
	results := []eventstore.AppendResult{
		f.append(t, a, eventstore.NoStream, a1...),
		f.append(t, b, eventstore.NoStream, b1...),
		f.append(t, a, eventstore.Exact(2), a2...),
		f.append(t, b, eventstore.Exact(0), b2...),
	}

	// then each result names the last revision the append wrote,
	for i, want := range []uint64{2, 0, 4, 2} {
		if results[i].Revision != want {
			t.Errorf("append %d: AppendResult.Revision = %d, want %d", i, results[i].Revision, want)
		}
	}
	// the streams hold their events from revision 0,
	f.wantStream(t, a, 0, append(a1, a2...)...)
	f.wantStream(t, b, 0, append(b1, b2...)...)

	// each result's position is its last event's,
	readA := f.read(t, a, eventstore.ReadStreamOptions{})
	readB := f.read(t, b, eventstore.ReadStreamOptions{})
	if len(readA) != 5 || len(readB) != 3 {
		t.Fatalf("read %d and %d events, want 5 and 3", len(readA), len(readB))
	}
	last := []eventstore.RecordedEvent{readA[2], readB[0], readA[4], readB[2]}
	for i, e := range last {
		if results[i].Position != e.Position {
			t.Errorf("append %d: AppendResult.Position = %v, want %v, the position of %s@%d",
				i, results[i].Position, e.Position, e.Stream, e.Revision)
		}
	}

	// and positions grow within and across appends, in streams and in the log.
	wantIncreasing(t, "stream a", readA)
	wantIncreasing(t, "stream b", readB)
	log := f.log(t)
	wantIncreasing(t, "log", log)
	want := []eventstore.RecordedEvent{readA[0], readA[1], readA[2], readB[0], readA[3], readA[4], readB[1], readB[2]}
	if diff := cmp.Diff(want, log, equalRecorded); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func testOneWinnerAtOneRevision(t *testing.T, s *suite) {
	cases := []struct {
		given    streamState
		expected eventstore.ExpectedRevision
	}{
		{existing, eventstore.Exact(2)},
		{missing, eventstore.NoStream},
		{expired, eventstore.NoStream},
	}
	for _, c := range cases {
		t.Run(c.given.String(), func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			stream := f.stream("s")
			// Given a stream,
			before := f.give(t, stream, c.given)

			// when 16 goroutines append two events each at its current revision at once,
			const writers = 16
			events := make([][]eventstore.EventData, writers)
			errs := make([]error, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range writers {
				events[w] = NewEvents(2)
				wg.Go(func() {
					<-start
					_, errs[w] = f.b.Append(t.Context(), stream, c.expected, events[w]...)
				})
			}
			close(start)
			wg.Wait()

			// then exactly one wins, the others fail against the winner's revision,
			winner := -1
			for w, err := range errs {
				if err != nil {
					continue
				}
				if winner >= 0 {
					t.Errorf("writers %d and %d both appended at %v", winner, w, c.expected)
				}
				winner = w
			}
			if winner < 0 {
				t.Fatalf("no writer succeeded: %v", errors.Join(errs...))
			}
			actual := eventstore.Exact(c.given.nextRevision() + 1)
			for w, err := range errs {
				if w != winner {
					wantWrongExpected(t, err, stream, c.expected, actual)
				}
			}
			// and the stream holds exactly the winner's events.
			f.wantStream(t, stream, c.given.readsFrom(), append(before, events[winner]...)...)
		})
	}
}

// testRefusalsNameRevisionsAReadFinds: racers append to one stream at the revision they last
// read and read it again when refused. A refusal's Actual is a revision that a read after it
// finds: a store that answered a loser with the revision of an append not yet durable would
// send it to read a stream that does not hold it yet.
func testRefusalsNameRevisionsAReadFinds(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("raced")
	f.append(t, stream, eventstore.NoStream, NewEvents(1)...)
	const racers, wins = 8, 4
	last := func() uint64 { // called by the racers: t.Errorf only
		opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}
		events, err := collect(t, f.b.ReadStream(t.Context(), stream, opts))
		if err != nil || len(events) != 1 {
			t.Errorf("read the stream's end: %d events, %v; want 1 event", len(events), err)
			return 0
		}
		return events[0].Revision
	}
	written := make([][]eventstore.EventData, racers)
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			rev := last()
			for len(written[r]) < wins && !t.Failed() {
				events, expected := NewEvents(1), rev
				res, err := f.b.Append(t.Context(), stream, eventstore.Exact(expected), events...)
				var wrong *eventstore.WrongExpectedRevisionError
				switch {
				case err == nil:
					written[r], rev = append(written[r], events...), res.Revision
				case errors.As(err, &wrong):
					actual, _ := wrong.Actual.Revision()
					if rev = last(); rev < actual {
						t.Errorf("refused at %d with actual %v, then read the stream's last revision as %d", expected, wrong.Actual, rev)
					}
				default:
					t.Errorf("racer %d: %v", r, err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(f.read(t, stream, eventstore.ReadStreamOptions{})); n != 1+racers*wins {
		t.Errorf("the stream holds %d events, want %d", n, 1+racers*wins)
	}
}

// testFailuresDoNotAffectConcurrentAppends is the behaviour group commit must keep: appends that
// fail (wrong expected revision, an event id stored elsewhere) fail alone, whatever other
// appends run at the same time.
func testFailuresDoNotAffectConcurrentAppends(t *testing.T, s *suite) {
	f := s.setup(t)
	const writers, rounds = 16, 12
	// Given events already stored, whose ids some appends will reuse,
	taken := NewEvents(writers)
	f.append(t, f.stream("taken"), eventstore.NoStream, taken...)

	// when 16 writers append to their own streams at once, every third append wrong,
	kinds := 3
	if s.opts.SkipGlobalEventIDUniqueness {
		kinds = 2
	}
	written := make([][]eventstore.EventData, writers)
	refused := make([][]eventstore.EventData, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			stream := f.stream(fmt.Sprintf("writer-%02d", w))
			for r := range rounds {
				events := NewEvents(1 + (w+r)%3)
				expected := eventstore.NoStream
				if n := uint64(len(written[w])); n > 0 {
					expected = eventstore.Exact(n - 1)
				}
				if r == 0 || (w+r)%3 != 0 {
					res, err := f.b.Append(t.Context(), stream, expected, events...)
					if err != nil {
						t.Errorf("writer %d, round %d: a good append failed: %v", w, r, err)
						continue
					}
					written[w] = append(written[w], events...)
					if want := uint64(len(written[w]) - 1); res.Revision != want {
						t.Errorf("writer %d, round %d: AppendResult.Revision = %d, want %d", w, r, res.Revision, want)
					}
					continue
				}
				current := expected // what the wrong appends will find
				switch (w + r/3) % kinds {
				case 0:
					expected = eventstore.Exact(uint64(len(written[w])) + 4)
					_, err := f.b.Append(t.Context(), stream, expected, events...)
					wantWrongExpected(t, err, stream, expected, current)
				case 1:
					expected = eventstore.NoStream
					_, err := f.b.Append(t.Context(), stream, expected, events...)
					wantWrongExpected(t, err, stream, expected, current)
				case 2:
					events[len(events)-1].ID = taken[w].ID
					_, err := f.b.Append(t.Context(), stream, expected, events...)
					if !errors.Is(err, eventstore.ErrDuplicateEventID) {
						t.Errorf("writer %d, round %d: appending an id stored elsewhere: error = %v, want one matching ErrDuplicateEventID", w, r, err)
					}
					events = events[:len(events)-1]
				}
				refused[w] = append(refused[w], events...)
			}
		})
	}
	close(start)
	wg.Wait()

	// then every good append is in its stream, in order, and no refused event anywhere.
	for w := range writers {
		f.wantStream(t, f.stream(fmt.Sprintf("writer-%02d", w)), 0, written[w]...)
		f.wantAbsent(t, refused[w]...)
	}
}

func testIdempotentRepeat(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	ctx := t.Context()

	// repeat appends events again and checks that it returns want and writes nothing.
	repeat := func(t *testing.T, expected eventstore.ExpectedRevision, events []eventstore.EventData, want eventstore.AppendResult) {
		t.Helper()
		stream0, log0 := f.read(t, stream, eventstore.ReadStreamOptions{}), f.log(t)
		res, err := f.b.Append(ctx, stream, expected, events...)
		if err != nil {
			t.Fatalf("repeat %d events at %v: %v", len(events), expected, err)
		}
		if !res.Same(want) {
			t.Errorf("repeat at %v: AppendResult = %+v, want the original %+v", expected, res, want)
		}
		wantFate(t, "a repeat", res, eventstore.FateRepeated)
		if diff := cmp.Diff(stream0, f.read(t, stream, eventstore.ReadStreamOptions{}), equalRecorded); diff != "" {
			t.Errorf("repeat at %v changed the stream (-before +after):\n%s", expected, diff)
		}
		if diff := cmp.Diff(log0, f.log(t), equalRecorded); diff != "" {
			t.Errorf("repeat at %v changed the log (-before +after):\n%s", expected, diff)
		}
	}

	// Given an append to a new stream, when it is repeated, then nothing changes.
	first := NewEvents(2)
	r1 := f.append(t, stream, eventstore.NoStream, first...)
	repeat(t, eventstore.NoStream, first, r1)

	// Given more appends, when each is repeated at its expected revision, even with later
	// events after it, then each returns its original result and nothing changes.
	second, third := NewEvents(1), NewEvents(3)
	r2 := f.append(t, stream, eventstore.Exact(1), second...)
	r3 := f.append(t, stream, eventstore.Exact(2), third...)
	repeat(t, eventstore.NoStream, first, r1)
	repeat(t, eventstore.Exact(1), second, r2)
	repeat(t, eventstore.Exact(2), third, r3)

	// and the stream goes on from where it was.
	fourth := NewEvents(1)
	if res := f.append(t, stream, eventstore.Exact(5), fourth...); res.Revision != 6 {
		t.Errorf("append after the repeats: revision %d, want 6", res.Revision)
	}
	f.wantStream(t, stream, 0, slices.Concat(first, second, third, fourth)...)
}

func testPartialRepeat(t *testing.T, s *suite) {
	type events = []eventstore.EventData
	cases := []struct {
		name string
		// when builds the append from the stored events and a new one.
		when func(stored events, fresh eventstore.EventData) events
	}{
		{"FirstMatchesSecondDiffers", func(s events, x eventstore.EventData) events { return events{s[0], x} }},
		{"FirstDiffersSecondMatches", func(s events, x eventstore.EventData) events { return events{x, s[1]} }},
		{"SwappedOrder", func(s events, _ eventstore.EventData) events { return events{s[1], s[0]} }},
		{"OneMore", func(s events, x eventstore.EventData) events { return events{s[0], s[1], x} }},
		{"SecondOnly", func(s events, _ eventstore.EventData) events { return events{s[1]} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			stream := f.stream("s")
			// Given a stream of two events,
			stored := NewEvents(2)
			f.append(t, stream, eventstore.NoStream, stored...)

			// when an append at NoStream only partly repeats them,
			fresh := NewEvents(1)[0]
			_, err := f.b.Append(t.Context(), stream, eventstore.NoStream, c.when(stored, fresh)...)

			// then it fails and writes nothing.
			wantWrongExpected(t, err, stream, eventstore.NoStream, eventstore.Exact(1))
			f.wantStream(t, stream, 0, stored...)
			f.wantAbsent(t, fresh)
		})
	}

	// The contract does not say whether repeating the first events of an append alone is a
	// repeat (KurrentDB: yes, it matches the events right after the expected revision) or a
	// partial one (it is not the whole original append). Either way it writes nothing, and a
	// success can only report the event it matched.
	t.Run("FirstOnly", func(t *testing.T) {
		t.Parallel()
		f := s.setup(t)
		stream := f.stream("s")
		stored := NewEvents(2)
		f.append(t, stream, eventstore.NoStream, stored...)
		want := f.read(t, stream, eventstore.ReadStreamOptions{})[0]

		res, err := f.b.Append(t.Context(), stream, eventstore.NoStream, stored[0])

		if err != nil {
			t.Logf("the backend refuses it: %v", err)
			wantWrongExpected(t, err, stream, eventstore.NoStream, eventstore.Exact(1))
		} else {
			t.Logf("the backend takes it for a repeat: %+v", res)
			if res.Revision != 0 || res.Position != want.Position {
				t.Errorf("AppendResult = %+v, want the matched event's {Revision: 0, Position: %v}", res, want.Position)
			}
		}
		f.wantStream(t, stream, 0, stored...)
	})
}

func testEventIDsUniqueInStore(t *testing.T, s *suite) {
	f := s.setup(t)
	a, b := f.stream("a"), f.stream("b")
	// Given a stream of two events,
	stored := NewEvents(2)
	r := f.append(t, a, eventstore.NoStream, stored...)

	wantDuplicate := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, eventstore.ErrDuplicateEventID) {
			t.Errorf("error = %v, want one matching ErrDuplicateEventID", err)
		}
	}
	t.Run("InAnotherStream", func(t *testing.T) {
		_, err := f.b.Append(t.Context(), b, eventstore.NoStream, stored[0])
		wantDuplicate(t, err)
		f.wantNotFound(t, b)
	})
	t.Run("AmongNewEvents", func(t *testing.T) {
		fresh := NewEvents(1)[0]
		_, err := f.b.Append(t.Context(), b, eventstore.Any, fresh, stored[1])
		wantDuplicate(t, err)
		f.wantNotFound(t, b)
		f.wantAbsent(t, fresh)
	})
	t.Run("LaterInTheSameStream", func(t *testing.T) {
		_, err := f.b.Append(t.Context(), a, eventstore.Exact(1), stored[0])
		wantDuplicate(t, err)
		f.wantStream(t, a, 0, stored...)
	})
	// Only exact expected revisions make repeats idempotent; repeating with Any or
	// StreamExists may be refused or recognised, but never stores an id twice.
	for _, c := range []struct {
		name     string
		expected eventstore.ExpectedRevision
	}{
		{"RepeatAtAny", eventstore.Any},
		{"RepeatAtStreamExists", eventstore.StreamExists},
	} {
		t.Run(c.name, func(t *testing.T) {
			expected := c.expected
			res, err := f.b.Append(t.Context(), a, expected, stored...)
			if err != nil {
				wantDuplicate(t, err)
			} else if !res.Same(r) {
				t.Errorf("a repeat that succeeds: AppendResult = %+v, want the original %+v", res, r)
			}
			f.wantStream(t, a, 0, stored...)
		})
	}
}

func testInvalidArguments(t *testing.T, s *suite) {
	f := s.setup(t)
	valid := func() eventstore.EventData { return NewEvents(1)[0] }
	with := func(change func(*eventstore.EventData)) eventstore.EventData {
		e := valid()
		change(&e)
		return e
	}
	twice := valid()
	cases := []struct {
		name   string
		stream string
		events []eventstore.EventData
	}{
		{"EmptyStreamName", "", []eventstore.EventData{valid()}},
		{"NoEvents", f.stream("no-events"), nil},
		{"EmptyType", f.stream("empty-type"), []eventstore.EventData{valid(), with(func(e *eventstore.EventData) { e.Type = "" })}},
		{"NilID", f.stream("nil-id"), []eventstore.EventData{valid(), with(func(e *eventstore.EventData) { e.ID = uuid.Nil })}},
		{"DataNotJSON", f.stream("data-not-json"), []eventstore.EventData{valid(), with(func(e *eventstore.EventData) { e.Data = []byte(`{"n":`) })}},
		{"DataEmpty", f.stream("data-empty"), []eventstore.EventData{valid(), with(func(e *eventstore.EventData) { e.Data = nil })}},
		{"MetadataNotJSON", f.stream("metadata-not-json"), []eventstore.EventData{valid(), with(func(e *eventstore.EventData) { e.Metadata = []byte(`not json`) })}},
		{"SameIDTwice", f.stream("same-id-twice"), []eventstore.EventData{twice, valid(), twice}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// When an append's arguments are wrong, then it fails as invalid and writes nothing.
			_, err := f.b.Append(t.Context(), c.stream, eventstore.Any, c.events...)
			if !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("error = %v, want one matching ErrInvalidArgument", err)
			}
			if c.stream != "" {
				f.wantNotFound(t, c.stream)
			}
			f.wantAbsent(t, c.events...)
		})
	}
	t.Run("DeleteEmptyStreamName", func(t *testing.T) {
		err := f.b.DeleteStream(t.Context(), "", eventstore.Any)
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("error = %v, want one matching ErrInvalidArgument", err)
		}
	})
	t.Run("ReadEmptyStreamName", func(t *testing.T) {
		events, err := collect(t, f.b.ReadStream(t.Context(), "", eventstore.ReadStreamOptions{}))
		if len(events) > 0 || !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("yielded %d events and error %v, want no events and an error matching ErrInvalidArgument", len(events), err)
		}
	})
}

func testLargeEvent(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given an event whose data is a 1 MiB JSON string, between two small ones,
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	data[0], data[len(data)-1] = '"', '"'
	events := NewEvents(3)
	events[1].Data = data
	events[1].Metadata = []byte(`{"size":"1MiB"}`)

	// when it is appended,
	f.append(t, stream, eventstore.NoStream, events...)

	// then it reads back intact from the stream and from the log.
	for what, read := range map[string][]eventstore.RecordedEvent{
		"stream": f.read(t, stream, eventstore.ReadStreamOptions{}),
		"log":    f.log(t),
	} {
		if diff := cmp.Diff(refsFor(stream, 0, events...), refsOf(read)); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", what, diff)
		}
		for i, e := range read {
			if !bytes.Equal(e.Data, events[i].Data) {
				t.Errorf("%s: event %d: data of %d bytes differs from the %d bytes appended (first difference at byte %d)",
					what, i, len(e.Data), len(events[i].Data), firstDifference(e.Data, events[i].Data))
			}
		}
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testTruncate(t *testing.T, s *suite) {
	f := s.setup(t)
	ctx := t.Context()
	stream, missing := f.stream("s"), f.stream("missing")
	// Given a stream of five events,
	given := NewEvents(5)
	f.append(t, stream, eventstore.NoStream, given...)

	// when it is truncated before revision 3,
	if err := f.b.Truncate(ctx, stream, 3); err != nil {
		t.Fatalf("Truncate: %v", err)
	}
	// then it reads from revision 3, forwards and backwards, and from an earlier revision too;
	f.wantStream(t, stream, 3, given[3:]...)
	if got := f.read(t, stream, eventstore.ReadStreamOptions{From: 1, Limit: 1}); len(got) != 1 || got[0].Revision != 3 {
		t.Errorf("a read from revision 1: %v; want the event at revision 3", refsOf(got))
	}
	back := f.read(t, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End})
	if len(back) != 2 || back[1].Revision != 3 {
		t.Errorf("a backwards read: %v; want revisions 4 and 3", refsOf(back))
	}
	// its revisions go on from where they were,
	more := NewEvents(1)
	if res := f.append(t, stream, eventstore.Exact(4), more...); res.Revision != 5 {
		t.Errorf("the append after the truncate is at revision %d, want 5", res.Revision)
	}
	// and truncating again, up to its last event, keeps that one.
	if err := f.b.Truncate(ctx, stream, 5); err != nil {
		t.Fatalf("Truncate up to the last event: %v", err)
	}
	f.wantStream(t, stream, 5, more...)

	// Past the last event, or on a missing stream, it fails and changes nothing.
	if err := f.b.Truncate(ctx, stream, 7); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Errorf("Truncate past the last event: %v; want ErrInvalidArgument", err)
	}
	f.wantStream(t, stream, 5, more...)
	if err := f.b.Truncate(ctx, missing, 0); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Errorf("Truncate of a missing stream: %v; want ErrStreamNotFound", err)
	}
	f.wantNotFound(t, missing)
}
