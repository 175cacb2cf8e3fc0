package eventstoretest

import (
	"bytes"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
)

func testReadStreamRanges(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given a stream of ten events,
	events := NewEvents(10)
	f.append(t, stream, eventstore.NoStream, events[:4]...)
	f.append(t, stream, eventstore.Exact(3), events[4:]...)

	fwd, bwd, end := eventstore.Forwards, eventstore.Backwards, eventstore.End
	cases := []struct {
		name string
		opts eventstore.ReadStreamOptions
		want []uint64
	}{
		{"Forwards", eventstore.ReadStreamOptions{Direction: fwd}, revisions(0, 9)},
		{"ForwardsFrom4", eventstore.ReadStreamOptions{Direction: fwd, From: 4}, revisions(4, 9)},
		{"ForwardsFrom4Limit3", eventstore.ReadStreamOptions{Direction: fwd, From: 4, Limit: 3}, revisions(4, 6)},
		{"ForwardsLimit1", eventstore.ReadStreamOptions{Direction: fwd, Limit: 1}, revisions(0, 0)},
		{"ForwardsLimitBeyondEnd", eventstore.ReadStreamOptions{Direction: fwd, From: 7, Limit: 100}, revisions(7, 9)},
		{"ForwardsFromLast", eventstore.ReadStreamOptions{Direction: fwd, From: 9}, revisions(9, 9)},
		{"ForwardsFromPastEnd", eventstore.ReadStreamOptions{Direction: fwd, From: 10}, nil},
		{"ForwardsFromFarPastEnd", eventstore.ReadStreamOptions{Direction: fwd, From: 1000, Limit: 5}, nil},
		{"BackwardsFromEnd", eventstore.ReadStreamOptions{Direction: bwd, From: end}, revisions(9, 0)},
		{"BackwardsFromEndLimit3", eventstore.ReadStreamOptions{Direction: bwd, From: end, Limit: 3}, revisions(9, 7)},
		{"BackwardsFromLast", eventstore.ReadStreamOptions{Direction: bwd, From: 9}, revisions(9, 0)},
		{"BackwardsFrom5", eventstore.ReadStreamOptions{Direction: bwd, From: 5}, revisions(5, 0)},
		{"BackwardsFrom5Limit2", eventstore.ReadStreamOptions{Direction: bwd, From: 5, Limit: 2}, revisions(5, 4)},
		{"BackwardsFrom0", eventstore.ReadStreamOptions{Direction: bwd, From: 0}, revisions(0, 0)},
		{"BackwardsLimitBeyondStart", eventstore.ReadStreamOptions{Direction: bwd, From: 2, Limit: 100}, revisions(2, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// when it is read with the options, then it yields those revisions and no error.
			got := f.read(t, stream, c.opts)
			if diff := cmp.Diff(pick(stream, events, c.want), refsOf(got)); diff != "" {
				t.Errorf("read %+v (-want +got):\n%s", c.opts, diff)
			}
		})
	}
}

func testReadStreamMissingOrDeleted(t *testing.T, s *suite) {
	f := s.setup(t)
	never, gone := f.stream("missing"), f.stream("deleted")
	// Given a stream never written and one deleted,
	f.give(t, gone, deleted)
	f.append(t, f.stream("other"), eventstore.NoStream, NewEvents(2)...)

	// when either is read, any way, then it yields one ErrStreamNotFound and nothing else.
	for _, stream := range []string{never, gone} {
		for _, opts := range []eventstore.ReadStreamOptions{
			{},
			{Direction: eventstore.Forwards, From: 1, Limit: 1},
			{Direction: eventstore.Backwards, From: eventstore.End},
			{Direction: eventstore.Backwards, From: 1, Limit: 1},
		} {
			wantNotFound(t, f.b, stream, opts)
		}
	}
}

func testReadStreamRecreated(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given a stream of three events that was deleted,
	f.give(t, stream, deleted)

	// when it is written again,
	events := NewEvents(2)
	if res := f.append(t, stream, eventstore.NoStream, events...); res.Revision != 4 {
		t.Errorf("AppendResult.Revision = %d, want 4", res.Revision)
	}

	// then reads see only the new events, at revisions 3 and 4.
	f.wantStream(t, stream, 3, events...)
	backwards := f.read(t, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End})
	want := refsFor(stream, 3, events...)
	slices.Reverse(want)
	if diff := cmp.Diff(want, refsOf(backwards)); diff != "" {
		t.Errorf("read backwards (-want +got):\n%s", diff)
	}
	first := f.read(t, stream, eventstore.ReadStreamOptions{Limit: 1})
	if diff := cmp.Diff(refsFor(stream, 3, events[0]), refsOf(first)); diff != "" {
		t.Errorf("read forwards, limit 1 (-want +got):\n%s", diff)
	}
}

func testRecordedFields(t *testing.T, s *suite) {
	f := s.setup(t)
	// Given events with varied data and metadata, some empty, in a stream with an unusual name,
	stream := f.stream("fields/Grüße 世界-1")
	events := NewEvents(7)
	for i, dm := range []struct{ typ, data, metadata string }{
		{"test.created.v1", `{"a":1}`, ``},
		{"test.renamed.v2", `{ "spaced" : [1, 2.50, "x"],  "nested": {"k": null} }`, `{"correlation":"c-1"}`},
		{"test.unicode.v1", `{"text":"Grüße, 世界 \u00e9 \"quoted\" \\ back"}`, `{}`},
		{"test.string.v1", `"just a string"`, ``},
		{"test.array.v1", `[]`, `[1, 2]`},
		{"test.null.v1", `null`, `{"z":0,"a":1}`},
		{"test.number.v1", `-1.5e3`, ``},
	} {
		events[i].Type = dm.typ
		events[i].Data = []byte(dm.data)
		if dm.metadata != "" {
			events[i].Metadata = []byte(dm.metadata)
		}
	}
	events[3].Metadata = []byte{} // empty but not nil

	// when they are appended and read back,
	f.append(t, stream, eventstore.NoStream, events...)
	read := f.read(t, stream, eventstore.ReadStreamOptions{})
	now := time.Now()

	// then each field is what was appended, byte for byte,
	if len(read) != len(events) {
		t.Fatalf("read %d events, want %d", len(read), len(events))
	}
	for i, e := range read {
		want := events[i]
		if e.ID != want.ID || e.Stream != stream || e.Revision != uint64(i) || e.Type != want.Type {
			t.Errorf("event %d: {ID: %s, Stream: %q, Revision: %d, Type: %q}, want {%s, %q, %d, %q}",
				i, e.ID, e.Stream, e.Revision, e.Type, want.ID, stream, i, want.Type)
		}
		if !bytes.Equal(e.Data, want.Data) {
			t.Errorf("event %d: Data = %s, want %s", i, e.Data, want.Data)
		}
		if !bytes.Equal(e.Metadata, want.Metadata) {
			t.Errorf("event %d: Metadata = %q, want %q", i, e.Metadata, want.Metadata)
		}
		// The recorded time is the store's clock, so allow for a minute of skew.
		if e.Recorded.IsZero() || e.Recorded.Before(f.start.Add(-time.Minute)) || e.Recorded.After(now.Add(time.Minute)) {
			t.Errorf("event %d: Recorded = %v, want a time near %v..%v", i, e.Recorded, f.start, now)
		}
	}

	// and the log holds the very same events.
	if diff := cmp.Diff(read, f.log(t), equalRecorded); diff != "" {
		t.Errorf("read all, compared to the stream (-stream +log):\n%s", diff)
	}
}

func testBreakEarly(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	// Given a stream of a thousand events,
	var events []eventstore.EventData
	for range 10 {
		batch := NewEvents(100)
		f.append(t, stream, eventstore.Any, batch...)
		events = append(events, batch...)
	}
	// that reads whole in either direction and in the log,
	if diff := cmp.Diff(pick(stream, events, revisions(0, 999)), refsOf(f.read(t, stream, eventstore.ReadStreamOptions{}))); diff != "" {
		t.Fatalf("read forwards (-want +got):\n%s", diff)
	}
	backwards := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End}
	if diff := cmp.Diff(pick(stream, events, revisions(999, 0)), refsOf(f.read(t, stream, backwards))); diff != "" {
		t.Fatalf("read backwards (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pick(stream, events, revisions(0, 999)), refsOf(f.log(t))); diff != "" {
		t.Fatalf("read all (-want +got):\n%s", diff)
	}

	// when reads and a subscription stop after three events,
	ctx := t.Context()
	for _, c := range []struct {
		name string
		seq  iter.Seq2[eventstore.RecordedEvent, error]
	}{
		{"ReadStream forwards", f.b.ReadStream(ctx, stream, eventstore.ReadStreamOptions{})},
		{"ReadStream backwards", f.b.ReadStream(ctx, stream, backwards)},
		{"ReadAll", f.b.ReadAll(ctx, eventstore.ReadAllOptions{Filter: f.own()})},
		{"SubscribeAll", f.b.SubscribeAll(ctx, eventstore.SubscribeOptions{Filter: f.own()})},
	} {
		within(t, "breaking out of "+c.name, func() {
			n := 0
			for _, err := range c.seq {
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					return
				}
				if n++; n == 3 {
					break
				}
			}
		})
	}

	// then the store still appends and reads,
	last := NewEvents(1)
	if res := f.append(t, stream, eventstore.Exact(999), last...); res.Revision != 1000 {
		t.Errorf("append after the reads: revision %d, want 1000", res.Revision)
	}
	tail := f.read(t, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1})
	if diff := cmp.Diff(refsFor(stream, 1000, last...), refsOf(tail)); diff != "" {
		t.Errorf("read the last event (-want +got):\n%s", diff)
	}

	// closes, and reopens with everything.
	f.close(t)
	f.reopen(t)
	count := 0
	for _, err := range f.b.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatalf("read after reopening: %v", err)
		}
		count++
	}
	if count != 1001 {
		t.Errorf("after reopening, the stream has %d events, want %d", count, 1001)
	}
}
