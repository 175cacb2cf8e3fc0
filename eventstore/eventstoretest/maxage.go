package eventstoretest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
)

// shortAge is the maximum age of the streams the suite waits to see expire: the shortest that
// KurrentDB's $maxAge, in whole seconds, can hold.
const shortAge = time.Second

// write makes appends with eventstore.Write and fails the test if that fails.
func (f *fixture) write(t *testing.T, appends ...eventstore.StreamAppend) []eventstore.AppendResult {
	t.Helper()
	results, err := eventstore.Write(t.Context(), f.b, appends...)
	if err != nil {
		t.Fatalf("write to %q and %d more: %v", appends[0].Stream, len(appends)-1, err)
	}
	return results
}

// waitExpired waits until each stream reads as not found, as it must once its events are past
// its maximum age, and fails the test if one does not within patience.
func (f *fixture) waitExpired(t *testing.T, streams ...string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for _, stream := range streams {
		for {
			events, err := Collect(f.b.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{}))
			if errors.Is(err, eventstore.ErrStreamNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q still read %d events and %v, %v after its maximum age; want it not found", stream, len(events), err, patience)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// testMaxAgeHidesOldEvents: a stream's maximum age, set with an append, hides its events
// older than it, those before the append included, and then the stream; other streams are
// whole.
func testMaxAgeHidesOldEvents(t *testing.T, s *suite) {
	f := s.setup(t)
	aged, young, plain := f.stream("aged"), f.stream("young"), f.stream("plain")
	// Given a stream of two events, one with a maximum age of an hour and one without,
	old, youngEvents, plainEvents := NewEvents(2), NewEvents(2), NewEvents(2)
	f.append(t, aged, eventstore.NoStream, old...)
	f.write(t, eventstore.StreamAppend{Stream: young, Expected: eventstore.NoStream, Events: youngEvents, MaxAge: time.Hour})
	f.append(t, plain, eventstore.NoStream, plainEvents...)

	// when, once they are older than shortAge, the first gets one more event and that age,
	time.Sleep(shortAge + 200*time.Millisecond)
	last := NewEvents(1)
	f.write(t, eventstore.StreamAppend{Stream: aged, Expected: eventstore.Exact(1), Events: last, MaxAge: shortAge})

	// then its reads leave out the older events, forwards and backwards,
	f.wantStream(t, aged, 2, last...)
	back := f.read(t, aged, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End})
	if len(back) != 1 || back[0].Revision != 2 {
		t.Errorf("a backwards read: %v; want the event at revision 2 alone", refsOf(back))
	}
	// and once the new event is past the age too, the stream reads as not found,
	f.waitExpired(t, aged)
	wantNotFound(t, f.b, aged, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End})

	// while the streams not past a maximum age read whole.
	f.wantStream(t, young, 0, youngEvents...)
	f.wantStream(t, plain, 0, plainEvents...)
}

// testReadStreamExpired: a stream whose events are all past its maximum age yields one
// ErrStreamNotFound, whatever the range read, as a deleted one.
func testReadStreamExpired(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	f.give(t, stream, expired)
	for _, opts := range []eventstore.ReadStreamOptions{
		{},
		{Direction: eventstore.Forwards, From: 1, Limit: 1},
		{Direction: eventstore.Backwards, From: eventstore.End},
		{Direction: eventstore.Backwards, From: 1, Limit: 1},
	} {
		wantNotFound(t, f.b, stream, opts)
	}
}

// testMaxAgeExpiredStreamGoesOn: an expired stream takes an append with NoStream, whose
// revisions go on after its last, and keeps its maximum age.
func testMaxAgeExpiredStreamGoesOn(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given a stream whose two events are past its maximum age,
	f.write(t, eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream, Events: NewEvents(2), MaxAge: shortAge})
	f.waitExpired(t, stream)

	// when an event is appended with NoStream and no maximum age of its own,
	again := NewEvents(1)
	res := f.append(t, stream, eventstore.NoStream, again...)

	// then it goes on after the expired events' revisions,
	if res.Revision != 2 {
		t.Errorf("AppendResult.Revision = %d, want 2", res.Revision)
	}
	f.wantStream(t, stream, 2, again...)
	// and expires in its turn: the stream kept its maximum age.
	f.waitExpired(t, stream)
}

// testMaxAgeSetByWrite: eventstore.Write sets the maximum age of the streams it is given with,
// alone or with another append, whatever the store (multi-stream appends or not); a negative
// one is refused and writes nothing.
func testMaxAgeSetByWrite(t *testing.T, s *suite) {
	f := s.setup(t)
	alone, with, without := f.stream("alone"), f.stream("with"), f.stream("without")
	toAlone, toWith, toWithout := NewEvents(1), NewEvents(2), NewEvents(1)
	f.write(t, eventstore.StreamAppend{Stream: alone, Expected: eventstore.NoStream, Events: toAlone, MaxAge: shortAge})
	f.write(t, eventstore.StreamAppend{Stream: with, Expected: eventstore.NoStream, Events: toWith, MaxAge: shortAge},
		eventstore.StreamAppend{Stream: without, Expected: eventstore.NoStream, Events: toWithout})
	f.wantStream(t, alone, 0, toAlone...)
	f.wantStream(t, with, 0, toWith...)

	f.waitExpired(t, alone, with)
	f.wantStream(t, without, 0, toWithout...)

	negative := f.stream("negative")
	_, err := eventstore.Write(t.Context(), f.b, eventstore.StreamAppend{Stream: negative, Expected: eventstore.NoStream, Events: NewEvents(1), MaxAge: -time.Second})
	if !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Errorf("a negative max age: error = %v, want one matching ErrInvalidArgument", err)
	}
	f.wantNotFound(t, negative)
}

// testMaxAgeForgotten: the events of expired streams leave the log only as the store forgets
// them. A store that forgets them does so with its writes, at most
// Options.ExpiredForgottenPerWrite streams a write; one that does not (0) keeps them in the
// log. Either way the streams go on from their last revisions.
func testMaxAgeForgotten(t *testing.T, s *suite) {
	f := s.setup(t)
	// Given 100 streams of one event, expired,
	const n = 100
	appends, streams := make([]eventstore.StreamAppend, n), make([]string, n)
	for i := range appends {
		streams[i] = f.stream(fmt.Sprintf("expiring-%03d", i))
		appends[i] = eventstore.StreamAppend{Stream: streams[i], Expected: eventstore.NoStream, Events: NewEvents(1), MaxAge: shortAge}
	}
	f.write(t, appends...)
	f.waitExpired(t, streams...)

	// when other streams are written,
	left := func() int {
		t.Helper()
		events, err := collect(t, f.b.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{f.stream("expiring-")}}}))
		if err != nil {
			t.Fatalf("read all: %v", err)
		}
		return len(events)
	}
	per := s.opts.ExpiredForgottenPerWrite
	if per == 0 {
		// then a store that does not forget them keeps their events in the log,
		for i := range 3 {
			f.append(t, f.stream(fmt.Sprintf("other-%d", i)), eventstore.NoStream, NewEvents(1)...)
		}
		if got := left(); got != n {
			t.Errorf("the log holds %d of the expired streams' events, want all %d", got, n)
		}
	} else {
		// and one that does forgets them, at most per a write, until none is left,
		before := left()
		for i, deadline := 0, time.Now().Add(patience); before > 0; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("%d expired streams' events still in the log after %d writes in %v", before, i, patience)
			}
			f.append(t, f.stream(fmt.Sprintf("other-%d", i)), eventstore.NoStream, NewEvents(1)...)
			after := left()
			if before-after > per {
				t.Errorf("one write forgot %d expired streams, want at most %d", before-after, per)
			}
			before = after
			time.Sleep(20 * time.Millisecond)
		}
	}
	// and the expired streams go on from their revisions.
	for _, stream := range []string{streams[0], streams[n-1]} {
		if res := f.append(t, stream, eventstore.NoStream, NewEvents(1)...); res.Revision != 1 {
			t.Errorf("append to %q once expired: revision %d, want 1", stream, res.Revision)
		}
	}
}
