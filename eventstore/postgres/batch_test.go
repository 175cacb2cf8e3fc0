package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
)

// One transaction decides its requests in order, each against what those before it did:
// repeats, refusals and duplicates among them, a delete and a recreation of the same stream,
// and a refused multi-stream append, which writes nothing.
func TestBatchDecidesEachRequestInOrder(t *testing.T) {
	s, _ := openDB(t)
	ctx := t.Context()
	a, b, c, d := "a", "b", "c", "d"
	ae, be, ce, de := eventstoretest.NewEvents(3), eventstoretest.NewEvents(2), eventstoretest.NewEvents(1), eventstoretest.NewEvents(1)
	appendTo := func(stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) *request {
		return &request{Ctx: ctx, Appends: []eventstore.StreamAppend{{Stream: stream, Expected: expected, Events: events}}}
	}
	cases := []struct {
		r    *request
		want func(t *testing.T, r *request)
	}{
		{appendTo(a, eventstore.NoStream, ae[:2]...), written(1, eventstore.FateWritten)},
		{appendTo(a, eventstore.NoStream, ae[:2]...), written(1, eventstore.FateRepeated)},
		{appendTo(a, eventstore.Exact(0), ce...), refused(a, eventstore.Exact(0), eventstore.Exact(1))},
		{appendTo(b, eventstore.Any, ae[0], be[0]), failed(eventstore.ErrDuplicateEventID)}, // ae[0] is a's
		{appendTo(b, eventstore.NoStream, be[:1]...), written(0, eventstore.FateWritten)},
		{&request{Ctx: ctx, Stream: a, Expected: eventstore.Exact(1)}, failed(nil)},
		{appendTo(a, eventstore.NoStream, ae[2]), written(2, eventstore.FateWritten)}, // after the revisions a had
		{appendTo(c, eventstore.Any, ae[0]), written(0, eventstore.FateWritten)},      // ae[0] went with the delete
		{&request{Ctx: ctx, Stream: b, Truncate: true, Before: 0}, failed(nil)},
		{&request{Ctx: ctx, Appends: []eventstore.StreamAppend{
			{Stream: d, Expected: eventstore.NoStream, Events: de},
			{Stream: b, Expected: eventstore.Exact(5), Events: be[1:]},
		}}, refused(b, eventstore.Exact(5), eventstore.Exact(0))},
	}
	requests := make([]*request, len(cases))
	for i, c := range cases {
		requests[i], c.r.Done = c.r, make(chan struct{})
	}
	s.commit(requests)

	for i, c := range cases {
		select {
		case <-c.r.Done:
			t.Run(fmt.Sprint(i), func(t *testing.T) { c.want(t, c.r) })
		default:
			t.Fatalf("request %d was not answered", i)
		}
	}
	if !requests[1].Results[0].Same(requests[0].Results[0]) {
		t.Errorf("the repeat answered %+v, want %+v", requests[1].Results[0], requests[0].Results[0])
	}
	// The streams hold what the requests wrote, all recorded by one transaction.
	wantOneTransaction(t, s, []streamWant{{a, 2, ae[2:]}, {b, 0, be[:1]}, {c, 0, ae[:1]}})
	if _, err := eventstoretest.Collect(s.ReadStream(ctx, d, eventstore.ReadStreamOptions{})); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Errorf("stream d of the refused multi-stream append: %v, want ErrStreamNotFound", err)
	}
}

// written checks that an append wrote, or found stored, its events up to revision rev.
func written(rev uint64, fate eventstore.Fate) func(t *testing.T, r *request) {
	return func(t *testing.T, r *request) {
		if r.Err != nil || len(r.Results) != 1 || r.Results[0].Revision != rev || r.Results[0].Fate != fate {
			t.Errorf("%+v, %v; want revision %d, fate %d", r.Results, r.Err, rev, fate)
		}
	}
}

// failed checks that a request failed with an error matching want, or succeeded if want is nil.
func failed(want error) func(t *testing.T, r *request) {
	return func(t *testing.T, r *request) {
		if !errors.Is(r.Err, want) {
			t.Errorf("error = %v, want %v", r.Err, want)
		}
	}
}

// refused checks that a request failed with this wrong-expected-revision error.
func refused(stream string, expected, actual eventstore.ExpectedRevision) func(t *testing.T, r *request) {
	return func(t *testing.T, r *request) {
		wantWrong(t, r.Err, stream, expected, actual)
	}
}

// streamWant is what a stream holds: events from revision first.
type streamWant struct {
	stream string
	first  uint64
	events []eventstore.EventData
}

// wantOneTransaction checks that each stream holds its events, and that one transaction
// recorded them all.
func wantOneTransaction(t *testing.T, s *Store, streams []streamWant) {
	t.Helper()
	var recorded []eventstore.RecordedEvent
	for _, want := range streams {
		got, err := eventstoretest.Collect(s.ReadStream(t.Context(), want.stream, eventstore.ReadStreamOptions{}))
		if err != nil || len(got) != len(want.events) || got[0].ID != want.events[0].ID || got[0].Revision != want.first {
			t.Errorf("stream %s: %+v, %v; want %s at revision %d", want.stream, got, err, want.events[0].ID, want.first)
		}
		recorded = append(recorded, got...)
	}
	for _, e := range recorded[1:] {
		if !e.Recorded.Equal(recorded[0].Recorded) {
			t.Errorf("events recorded at %v and %v: not one transaction", recorded[0].Recorded, e.Recorded)
		}
	}
}

// A request whose caller gave up before its transaction began is answered with the context's
// error and left out.
func TestBatchLeavesOutCancelledRequests(t *testing.T) {
	s, _ := openDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := &request{Ctx: ctx, Done: make(chan struct{}), Appends: []eventstore.StreamAppend{
		{Stream: "s", Expected: eventstore.NoStream, Events: eventstoretest.NewEvents(1)},
	}}
	s.commit([]*request{r})
	if !errors.Is(r.Err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", r.Err)
	}
	if _, err := eventstoretest.Collect(s.ReadStream(t.Context(), "s", eventstore.ReadStreamOptions{})); !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Errorf("read the stream: %v, want ErrStreamNotFound", err)
	}
}

func wantWrong(t *testing.T, err error, stream string, expected, actual eventstore.ExpectedRevision) {
	t.Helper()
	wrong, ok := errors.AsType[*eventstore.WrongExpectedRevisionError](err)
	if !ok || wrong.Stream != stream || wrong.Expected != expected || wrong.Actual != actual {
		t.Errorf("error = %v, want stream %q expected %v actual %v", err, stream, expected, actual)
	}
}
