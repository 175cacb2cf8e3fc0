package sqlite

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
)

func someEvents(stream string, from, to uint64) []eventstore.RecordedEvent {
	var evs []eventstore.RecordedEvent
	for p := from; p <= to; p++ {
		evs = append(evs, eventstore.RecordedEvent{Stream: stream, Position: position(p)})
	}
	return evs
}

func positions(evs []eventstore.RecordedEvent) string {
	if len(evs) == 0 {
		return "[]"
	}
	return fmt.Sprintf("[%d..%d] (%d)", evs[0].Position.Commit, evs[len(evs)-1].Position.Commit, len(evs))
}

// all returns every event the tail holds after position after, asking again while it has more,
// and whether it holds all of them.
func (t *tail) all(after uint64) ([]eventstore.RecordedEvent, bool) {
	var evs []eventstore.RecordedEvent
	for {
		some, more, ok := t.since(after)
		if !ok {
			return nil, false
		}
		evs = append(evs, some...)
		if !more {
			return evs, true
		}
		if len(some) == 0 {
			panic("since: more events, but none handed out")
		}
		after = some[len(some)-1].Position.Commit
	}
}

// The tail answers for every position from its start on, and only for those: what it trims
// or never held is read from the file.
func TestTailHoldsEverythingAfterItsStart(t *testing.T) {
	tl := &tail{from: 10}
	if evs, ok := tl.all(10); !ok || len(evs) != 0 {
		t.Fatalf("since(10) on an empty tail from 10: %v, %v; want nothing, held", positions(evs), ok)
	}
	if _, ok := tl.all(9); ok {
		t.Fatal("since(9) on a tail from 10: held; want not held")
	}
	tl.add(someEvents("a", 11, 20), nil)
	if evs, ok := tl.all(15); !ok || positions(evs) != "[16..20] (5)" {
		t.Fatalf("since(15): %v, %v; want 16..20", positions(evs), ok)
	}
	handed, _, _ := tl.since(10)

	// Past its size it drops its oldest chunk, and answers only from there on.
	tl.add(someEvents("b", 21, 20+tailEvents), nil)
	last := uint64(20 + tailEvents)
	first := uint64(11 + tailChunk)
	if _, ok := tl.all(first - 2); ok {
		t.Fatalf("since(%d) after trimming: held; want not held", first-2)
	}
	if evs, ok := tl.all(first - 1); !ok || positions(evs) != fmt.Sprintf("[%d..%d] (%d)", first, last, last-first+1) {
		t.Fatalf("since(%d) after trimming: %v, %v", first-1, positions(evs), ok)
	}
	if evs, more, _ := tl.since(first - 1); !more || positions(evs) != fmt.Sprintf("[%d..%d] (%d)", first, 10+tailChunk*2, tailChunk) {
		t.Fatalf("since(%d) after trimming: %v and more %v; want the rest of its first chunk, and more", first-1, positions(evs), more)
	}
	if positions(handed) != "[11..20] (10)" || handed[0].Stream != "a" {
		t.Fatalf("events handed out before changed to %v", positions(handed))
	}

	// Past its bytes, it drops its older half.
	bytes := &tail{}
	huge := someEvents("h", 1, 4)
	for i := range huge {
		huge[i].Data = make([]byte, tailBytes/3)
	}
	bytes.add(huge, nil)
	if evs, ok := bytes.all(2); !ok || positions(evs) != "[3..4] (2)" || bytes.bytes != 2*(tailBytes/3) {
		t.Fatalf("after %d bytes: since(2) = %v, %v, %d bytes kept; want 3..4", 4*(tailBytes/3), positions(evs), ok, bytes.bytes)
	}

	// One event larger than that is not kept.
	bytes.add([]eventstore.RecordedEvent{{Stream: "h", Position: position(5), Data: make([]byte, tailBytes+1)}}, nil)
	if evs, ok := bytes.all(4); ok || len(evs) != 0 {
		t.Fatalf("after an event of %d bytes: since(4) = %v, %v; want it read from the file", tailBytes+1, positions(evs), ok)
	}

	// A deleted stream's events leave it, as they leave the file.
	tl.add(someEvents("c", last+1, last+3), nil)
	tl.add(someEvents("d", last+4, last+4), map[string]uint64{"c": math.MaxUint64})
	if evs, _ := tl.all(last); positions(evs) != fmt.Sprintf("[%d..%d] (1)", last+4, last+4) {
		t.Fatalf("after deleting c: %v; want only d's event", positions(evs))
	}
	if evs, ok := tl.all(first - 1); !ok || len(evs) != int(last-first+2) || tl.events != len(evs) {
		t.Fatalf("after deleting c: %d events from %d, %d counted; want %d", len(evs), first, tl.events, last-first+2)
	}
	tl.add(someEvents("e", last+5, last+5), nil)
	if evs, _ := tl.all(last); positions(evs) != fmt.Sprintf("[%d..%d] (2)", last+4, last+5) {
		t.Fatalf("after deleting c and adding e: %v; want d's and e's events", positions(evs))
	}
}

// Events handed out are never written over: the tail appends past their end or into another
// array, as it fills its chunks and drops them.
func TestTailNeverWritesOverEventsHandedOut(t *testing.T) {
	tl := &tail{}
	var handed [][]eventstore.RecordedEvent
	next := uint64(1)
	for range 3 * tailEvents / 7 {
		tl.add(someEvents("s", next, next+6), nil)
		next += 7
		if evs, _, ok := tl.since(next - 8); ok {
			handed = append(handed, evs)
		}
	}
	for i, evs := range handed {
		for j, e := range evs {
			if e.Position.Commit != uint64(7*i+1+j) {
				t.Fatalf("events handed out after the commit of %d: event %d is at %d; want %d", 7*(i+1), j, e.Position.Commit, 7*i+1+j)
			}
		}
	}
}

// A subscription fed from the tail reads on across its chunks without waiting for another
// commit.
func TestSubscriptionReadsAcrossTheTailsChunks(t *testing.T) {
	s, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const total = 3*tailChunk + 10
	events := make([]eventstore.EventData, 0, 100)
	for n := 0; n < total; n += cap(events) {
		events = events[:0]
		for range min(cap(events), total-n) {
			events = append(events, event())
		}
		if _, err := s.Append(t.Context(), "s", eventstore.Any, events...); err != nil {
			t.Fatal(err)
		}
	}
	if _, more, ok := s.tail.since(0); !ok || !more {
		t.Fatalf("tail of %d events: all held %v, in more than one chunk %v; want both", total, ok, more)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	read := 0
	for e, err := range s.SubscribeAll(ctx, eventstore.SubscribeOptions{}) {
		if err != nil {
			t.Fatalf("after %d events: %v", read, err)
		}
		if read++; e.Position.Commit != uint64(read) {
			t.Fatalf("event %d at position %d", read, e.Position.Commit)
		}
		if read == total {
			break
		}
	}
}

// Large events keep the tail within tailBytes of heap, not only of its count: the events it
// lets go of are freed, even those that shared an array with events it keeps.
func TestTailOfLargeEventsStaysWithinItsBytes(t *testing.T) {
	var tl tail
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for p := uint64(1); p <= 200; p++ {
		e := eventstore.RecordedEvent{Stream: "s", Position: position(p), Data: make([]byte, 1<<20)}
		tl.add([]eventstore.RecordedEvent{e}, nil)
	}
	grown := int64(heap()) - int64(before)
	if tl.bytes > tailBytes {
		t.Errorf("the tail counts %d bytes, over %d", tl.bytes, tailBytes)
	}
	if grown > tailBytes+tailBytes/4 {
		t.Errorf("the tail of 200 events of 1 MiB holds %d MiB of heap; want at most %d MiB and a little", grown>>20, tailBytes>>20)
	}
	runtime.KeepAlive(&tl)
}
