package eventstoretest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
)

// multi returns the backend as a MultiStreamAppender, or fails the test for one that is not: a
// backend without it names the group in Options.NotRun.
func (f *fixture) multi(t *testing.T) eventstore.MultiStreamAppender {
	t.Helper()
	m, ok := f.b.(eventstore.MultiStreamAppender)
	if !ok {
		t.Fatal("the backend does not append to several streams atomically: name MultiStreamAppend in Options.NotRun")
	}
	return m
}

func testMultiStreamAppendWritesAll(t *testing.T, s *suite) {
	f := s.setup(t)
	m := f.multi(t)
	// Given a stream at revision 2 and a missing one,
	a, b := f.stream("a"), f.stream("b")
	before := f.give(t, a, existing)

	// when one multi-stream append writes to both,
	toA, toB := NewEvents(2), NewEvents(1)
	results, err := m.MultiStreamAppend(t.Context(),
		eventstore.StreamAppend{Stream: a, Expected: eventstore.Exact(2), Events: toA},
		eventstore.StreamAppend{Stream: b, Expected: eventstore.NoStream, Events: toB})
	if err != nil {
		t.Fatalf("MultiStreamAppend: %v", err)
	}

	// then each stream holds its events, each result locates its append's last event, and the
	// log holds them in the order of the appends.
	f.wantStream(t, a, 0, append(before, toA...)...)
	f.wantStream(t, b, 0, toB...)
	if len(results) != 2 {
		t.Fatalf("got %d results, want 2", len(results))
	}
	log := f.log(t)
	wantIncreasing(t, "log", log)
	if diff := cmp.Diff(append(refsFor(a, 0, before...), append(refsFor(a, 3, toA...), refsFor(b, 0, toB...)...)...), refsOf(log)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	for i, want := range []eventstore.RecordedEvent{log[4], log[5]} {
		wantFate(t, "a new multi-stream append", results[i], eventstore.FateWritten)
		if results[i].Revision != want.Revision || results[i].Position != want.Position {
			t.Errorf("results[%d] = %+v, want revision %d at %v", i, results[i], want.Revision, want.Position)
		}
	}

	// An exact repeat writes nothing and answers as the first did.
	again, err := m.MultiStreamAppend(t.Context(),
		eventstore.StreamAppend{Stream: a, Expected: eventstore.Exact(2), Events: toA},
		eventstore.StreamAppend{Stream: b, Expected: eventstore.NoStream, Events: toB})
	if err != nil {
		t.Fatalf("repeated MultiStreamAppend: %v", err)
	}
	for i := range again {
		wantFate(t, "a repeated multi-stream append", again[i], eventstore.FateRepeated)
		if !again[i].Same(results[i]) {
			t.Errorf("repeat: results[%d] = %+v, want %+v", i, again[i], results[i])
		}
	}
	if n := len(f.log(t)); n != len(log) {
		t.Errorf("the repeat changed the log from %d events to %d", len(log), n)
	}
}

func testMultiStreamAppendAllOrNothing(t *testing.T, s *suite) {
	// Whichever append does not match its stream, neither is written.
	for _, failing := range []int{0, 1} {
		t.Run([]string{"FirstFails", "SecondFails"}[failing], func(t *testing.T) {
			t.Parallel()
			f := s.setup(t)
			m := f.multi(t)
			a, b := f.stream("a"), f.stream("b")
			before := f.give(t, a, existing)
			appends := []eventstore.StreamAppend{
				{Stream: a, Expected: eventstore.Exact(2), Events: NewEvents(1)},
				{Stream: b, Expected: eventstore.NoStream, Events: NewEvents(2)},
			}
			wrong := []eventstore.ExpectedRevision{eventstore.Exact(1), eventstore.StreamExists}[failing]
			appends[failing].Expected = wrong

			_, err := m.MultiStreamAppend(t.Context(), appends...)
			wantWrongExpected(t, err, appends[failing].Stream, wrong, []eventstore.ExpectedRevision{eventstore.Exact(2), eventstore.NoStream}[failing])
			f.wantStream(t, a, 0, before...)
			f.wantNotFound(t, b)
			f.wantAbsent(t, append(appends[0].Events, appends[1].Events...)...)
		})
	}
	t.Run("DuplicateEventID", func(t *testing.T) {
		t.Parallel()
		f := s.setup(t)
		m := f.multi(t)
		a, b := f.stream("a"), f.stream("b")
		shared := NewEvents(1)
		_, err := m.MultiStreamAppend(t.Context(),
			eventstore.StreamAppend{Stream: a, Expected: eventstore.NoStream, Events: shared},
			eventstore.StreamAppend{Stream: b, Expected: eventstore.NoStream, Events: shared})
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("one event id in two streams: error = %v, want ErrInvalidArgument", err)
		}
		f.wantNotFound(t, a)
		f.wantNotFound(t, b)
	})
}

// testMultiStreamAppendPartialRepeat: a call that repeats one stream's earlier append and is new
// to another is refused on the repeated stream, and writes nothing: the repeated events were
// written without the other append, which a caller may record its decision in.
func testMultiStreamAppendPartialRepeat(t *testing.T, s *suite) {
	f := s.setup(t)
	m := f.multi(t)
	// Given a stream at revision 2 and an append of one event to it,
	a, b := f.stream("a"), f.stream("b")
	before := f.give(t, a, existing)
	toA := NewEvents(1)
	if _, err := f.b.Append(t.Context(), a, eventstore.Exact(2), toA...); err != nil {
		t.Fatalf("Append: %v", err)
	}

	// when a multi-stream append repeats it along with a new stream,
	_, err := m.MultiStreamAppend(t.Context(),
		eventstore.StreamAppend{Stream: a, Expected: eventstore.Exact(2), Events: toA},
		eventstore.StreamAppend{Stream: b, Expected: eventstore.NoStream, Events: NewEvents(1)})

	// then the repeated stream refuses it, and the new one is not written.
	wantWrongExpected(t, err, a, eventstore.Exact(2), eventstore.Exact(3))
	f.wantStream(t, a, 0, append(before, toA...)...)
	f.wantNotFound(t, b)
}

// testMultiStreamAppendOneWinner is what an idempotency claim appended along with its effect
// rests on: of concurrent appends that all claim one stream with NoStream, one wins, and the
// others' other streams stay unwritten.
func testMultiStreamAppendOneWinner(t *testing.T, s *suite) {
	f := s.setup(t)
	m := f.multi(t)
	claim := f.stream("claim")
	const writers = 16
	effects := make([]eventstore.StreamAppend, writers)
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		effects[w] = eventstore.StreamAppend{Stream: f.stream("effect-" + string(rune('a'+w))), Expected: eventstore.NoStream, Events: NewEvents(1)}
		wg.Go(func() {
			<-start
			_, errs[w] = m.MultiStreamAppend(t.Context(),
				eventstore.StreamAppend{Stream: claim, Expected: eventstore.NoStream, Events: NewEvents(1)}, effects[w])
		})
	}
	close(start)
	wg.Wait()

	winners := 0
	for w, err := range errs {
		if err == nil {
			winners++
			f.wantStream(t, effects[w].Stream, 0, effects[w].Events...)
			continue
		}
		wantWrongExpected(t, err, claim, eventstore.NoStream, eventstore.Exact(0))
		f.wantNotFound(t, effects[w].Stream)
	}
	if winners != 1 {
		t.Errorf("%d writers claimed the stream, want 1: %v", winners, errors.Join(errs...))
	}
}

func testMultiStreamAppendInvalidArguments(t *testing.T, s *suite) {
	f := s.setup(t)
	m := f.multi(t)
	a := f.stream("a")
	cases := []struct {
		name    string
		appends []eventstore.StreamAppend
	}{
		{"NoAppends", nil},
		{"StreamTwice", []eventstore.StreamAppend{
			{Stream: a, Expected: eventstore.Any, Events: NewEvents(1)},
			{Stream: a, Expected: eventstore.Any, Events: NewEvents(1)},
		}},
		{"NoEvents", []eventstore.StreamAppend{
			{Stream: a, Expected: eventstore.Any, Events: NewEvents(1)},
			{Stream: f.stream("b"), Expected: eventstore.Any},
		}},
		{"EmptyStreamName", []eventstore.StreamAppend{{Expected: eventstore.Any, Events: NewEvents(1)}}},
		{"NegativeMaxAge", []eventstore.StreamAppend{{Stream: a, Expected: eventstore.Any, Events: NewEvents(1), MaxAge: -time.Second}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := m.MultiStreamAppend(t.Context(), c.appends...); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("error = %v, want one matching ErrInvalidArgument", err)
			}
		})
	}
	f.wantNotFound(t, a)
}

// testMultiStreamAppendMaxAge: a multi-stream append sets the maximum age of the streams of
// the appends that have one, and of no other; a refused one sets none.
func testMultiStreamAppendMaxAge(t *testing.T, s *suite) {
	f := s.setup(t)
	m := f.multi(t)
	with, without, other := f.stream("with"), f.stream("without"), f.stream("other")
	toWith, toWithout := NewEvents(2), NewEvents(1)
	_, err := m.MultiStreamAppend(t.Context(),
		eventstore.StreamAppend{Stream: with, Expected: eventstore.NoStream, Events: toWith, MaxAge: shortAge},
		eventstore.StreamAppend{Stream: without, Expected: eventstore.NoStream, Events: toWithout})
	if err != nil {
		t.Fatalf("MultiStreamAppend: %v", err)
	}
	f.wantStream(t, with, 0, toWith...)

	// A refused append sets no maximum age, whichever of its streams it refuses.
	_, err = m.MultiStreamAppend(t.Context(),
		eventstore.StreamAppend{Stream: without, Expected: eventstore.Exact(0), Events: NewEvents(1), MaxAge: shortAge},
		eventstore.StreamAppend{Stream: other, Expected: eventstore.StreamExists, Events: NewEvents(1)})
	wantWrongExpected(t, err, other, eventstore.StreamExists, eventstore.NoStream)

	f.waitExpired(t, with)
	time.Sleep(shortAge) // past the age the refused append would have set
	f.wantStream(t, without, 0, toWithout...)
}
