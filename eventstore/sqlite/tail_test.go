package sqlite

import (
	"fmt"
	"testing"

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

// The tail answers for every position from its start on, and only for those: what it trims
// or never held is read from the file.
func TestTailHoldsEverythingAfterItsStart(t *testing.T) {
	tl := &tail{from: 10}
	if evs, ok := tl.since(10); !ok || len(evs) != 0 {
		t.Fatalf("since(10) on an empty tail from 10: %v, %v; want nothing, held", positions(evs), ok)
	}
	if _, ok := tl.since(9); ok {
		t.Fatal("since(9) on a tail from 10: held; want not held")
	}
	tl.add(someEvents("a", 11, 20), nil)
	if evs, ok := tl.since(15); !ok || positions(evs) != "[16..20] (5)" {
		t.Fatalf("since(15): %v, %v; want 16..20", positions(evs), ok)
	}
	handed, _ := tl.since(10)

	// Past its size it drops its older half, and answers only from there on.
	tl.add(someEvents("b", 21, 20+tailEvents), nil)
	last := uint64(20 + tailEvents)
	first := last - tailEvents/2 + 1
	if _, ok := tl.since(first - 2); ok {
		t.Fatalf("since(%d) after trimming: held; want not held", first-2)
	}
	if evs, ok := tl.since(first - 1); !ok || positions(evs) != fmt.Sprintf("[%d..%d] (%d)", first, last, tailEvents/2) {
		t.Fatalf("since(%d) after trimming: %v, %v", first-1, positions(evs), ok)
	}
	if positions(handed) != "[11..20] (10)" || handed[0].Stream != "a" {
		t.Fatalf("events handed out before changed to %v", positions(handed))
	}

	// Past its bytes, it drops its older half too.
	bytes := &tail{}
	huge := someEvents("h", 1, 4)
	for i := range huge {
		huge[i].Data = make([]byte, tailBytes/3)
	}
	bytes.add(huge, nil)
	if evs, ok := bytes.since(2); !ok || positions(evs) != "[3..4] (2)" || bytes.bytes != 2*(tailBytes/3) {
		t.Fatalf("after %d bytes: since(2) = %v, %v, %d bytes kept; want 3..4", 4*(tailBytes/3), positions(evs), ok, bytes.bytes)
	}

	// One event larger than that is not kept.
	bytes.add([]eventstore.RecordedEvent{{Stream: "h", Position: position(5), Data: make([]byte, tailBytes+1)}}, nil)
	if evs, ok := bytes.since(4); ok || len(evs) != 0 {
		t.Fatalf("after an event of %d bytes: since(4) = %v, %v; want it read from the file", tailBytes+1, positions(evs), ok)
	}

	// A deleted stream's events leave it, as they leave the file.
	tl.add(someEvents("c", last+1, last+3), nil)
	tl.add(someEvents("d", last+4, last+4), map[string]bool{"c": true})
	if evs, _ := tl.since(last); positions(evs) != fmt.Sprintf("[%d..%d] (1)", last+4, last+4) {
		t.Fatalf("after deleting c: %v; want only d's event", positions(evs))
	}
}
