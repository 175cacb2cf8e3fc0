package sqlite

import (
	"fmt"
	"testing"

	"github.com/acme/orders/eventstore"
)

func tailEvents(stream string, from, to uint64) []eventstore.RecordedEvent {
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
	tl.add(tailEvents("a", 11, 20), nil)
	if evs, ok := tl.since(15); !ok || positions(evs) != "[16..20] (5)" {
		t.Fatalf("since(15): %v, %v; want 16..20", positions(evs), ok)
	}
	handed, _ := tl.since(10)

	// Past its size it drops its older half, and answers only from there on.
	tl.add(tailEvents("b", 21, 20+tailSize), nil)
	last := uint64(20 + tailSize)
	first := last - tailSize/2 + 1
	if _, ok := tl.since(first - 2); ok {
		t.Fatalf("since(%d) after trimming: held; want not held", first-2)
	}
	if evs, ok := tl.since(first - 1); !ok || positions(evs) != fmt.Sprintf("[%d..%d] (%d)", first, last, tailSize/2) {
		t.Fatalf("since(%d) after trimming: %v, %v", first-1, positions(evs), ok)
	}
	if positions(handed) != "[11..20] (10)" || handed[0].Stream != "a" {
		t.Fatalf("events handed out before changed to %v", positions(handed))
	}

	// A deleted stream's events leave it, as they leave the file.
	tl.add(tailEvents("c", last+1, last+3), nil)
	tl.add(tailEvents("d", last+4, last+4), map[string]bool{"c": true})
	if evs, _ := tl.since(last); positions(evs) != fmt.Sprintf("[%d..%d] (1)", last+4, last+4) {
		t.Fatalf("after deleting c: %v; want only d's event", positions(evs))
	}
}
