package sqlite

import (
	"slices"
	"sync"

	"github.com/acme/orders/eventstore"
)

// tailSize bounds how many of the latest events the tail keeps; past it, the older half goes.
const tailSize = 8192

// tail is the end of the global log, kept in memory by the writer after each commit, so that a
// subscription that keeps up is fed without reading the file: a live event used to be read
// back once per subscriber, the row's bytes copied from the driver each time.
type tail struct {
	mu sync.RWMutex
	// from is a position such that every event committed after it is in events, in log order.
	from   uint64
	events []eventstore.RecordedEvent
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
	if len(deleted) > 0 {
		t.events = slices.DeleteFunc(slices.Clone(t.events), func(e eventstore.RecordedEvent) bool { return deleted[e.Stream] })
	}
	t.events = append(t.events, events...)
	if n := len(t.events); n > tailSize {
		drop := n - tailSize/2
		t.from = t.events[drop-1].Position.Commit
		t.events = slices.Clone(t.events[drop:])
	}
}
