package sqlite

import (
	"slices"
	"sync"

	"github.com/acme/orders/eventstore"
)

// The tail keeps up to tailEvents of the latest events, and up to tailBytes of their data and
// metadata; past either, the older half goes.
const (
	tailEvents = 8192
	tailBytes  = 16 << 20
)

// tail is the end of the global log, kept in memory by the writer after each commit, so that a
// subscription that keeps up is fed without reading the file: a live event used to be read
// back once per subscriber, the row's bytes copied from the driver each time.
type tail struct {
	mu sync.RWMutex
	// from is a position such that every event committed after it is in events, in log order.
	from   uint64
	events []eventstore.RecordedEvent
	bytes  int // of the events' data and metadata
}

// since returns the events committed after position after, if the tail holds all of them. The
// slice is shared: it must not be modified, nor the events' bytes.
func (t *tail) since(after uint64) ([]eventstore.RecordedEvent, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if after < t.from {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(t.events, after, func(e eventstore.RecordedEvent, after uint64) int {
		if e.Position.Commit <= after {
			return -1
		}
		return 1
	})
	return t.events[i:len(t.events):len(t.events)], true
}

// add appends a commit's events, having dropped those of the streams it deleted. It never
// writes over what since handed out: only past its length, or into a new array.
func (t *tail) add(events []eventstore.RecordedEvent, deleted map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := func(e eventstore.RecordedEvent) bool { return deleted[e.Stream] }
	if len(deleted) > 0 && slices.ContainsFunc(t.events, gone) {
		t.events = slices.DeleteFunc(slices.Clone(t.events), gone)
		t.bytes = 0
		for _, e := range t.events {
			t.bytes += size(e)
		}
	}
	t.events = append(t.events, events...)
	for _, e := range events {
		t.bytes += size(e)
	}
	for len(t.events) > tailEvents || t.bytes > tailBytes {
		drop := max(len(t.events)/2, 1)
		if len(t.events) > tailEvents {
			drop = len(t.events) - tailEvents/2
		}
		for _, e := range t.events[:drop] {
			t.bytes -= size(e)
		}
		t.from = t.events[drop-1].Position.Commit
		// Room for tailEvents and a commit's worth more (the one that crosses the limit), so
		// that the commits until the next drop append in place instead of growing the array
		// step by step, each step a copy.
		t.events = append(make([]eventstore.RecordedEvent, 0, tailEvents+tailEvents/8), t.events[drop:]...)
	}
}

func size(e eventstore.RecordedEvent) int { return len(e.Data) + len(e.Metadata) }
