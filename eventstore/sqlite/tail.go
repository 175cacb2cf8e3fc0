package sqlite

import (
	"slices"
	"sync"

	"github.com/acme/orders/eventstore"
)

// The tail keeps up to tailEvents of the latest events, and up to tailBytes of their data and
// metadata. It holds them in chunks of tailChunk events: past tailEvents its oldest chunk goes,
// and past tailBytes its older half of the events.
const (
	tailEvents = 8192
	tailBytes  = 16 << 20
	tailChunk  = 1024
)

// tail is the end of the global log, kept in memory by the writer after each commit, so that a
// subscription that keeps up is fed without reading the file: a live event used to be read
// back once per subscriber, the row's bytes copied from the driver each time.
//
// The events are in chunks, each an array of its own that the tail appends to up to its
// capacity, and then starts another: an event is written once, and its chunk is let go of
// whole. (A single array, copied to a new one on each drop of its older half, allocated and
// copied about two events' worth per event kept: 1.86 KB per create against 0.72 KB in
// BenchmarkCreate, docs/benchmarks.md.)
type tail struct {
	mu sync.RWMutex
	// from is a position such that every event committed after it is in chunks, in log order.
	from   uint64
	chunks [][]eventstore.RecordedEvent
	events int // in chunks
	bytes  int // of the events' data and metadata
}

// since returns events committed after position after, if the tail holds all of them: those
// up to the end of the chunk that holds the first one, and more says whether later chunks hold
// others. The slice is shared: it must not be modified, nor the events' bytes.
func (t *tail) since(after uint64) (events []eventstore.RecordedEvent, more, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if after < t.from {
		return nil, false, false
	}
	// A subscription that keeps up wants the last chunk: look from the end.
	i := len(t.chunks) - 1
	for i > 0 && t.chunks[i-1][len(t.chunks[i-1])-1].Position.Commit > after {
		i--
	}
	if i < 0 {
		return nil, false, true
	}
	c := t.chunks[i]
	j, _ := slices.BinarySearchFunc(c, after, func(e eventstore.RecordedEvent, after uint64) int {
		if e.Position.Commit <= after {
			return -1
		}
		return 1
	})
	return c[j:len(c):len(c)], i < len(t.chunks)-1, true
}

// add appends a commit's events, having dropped those it deleted or truncated (gone: a
// stream's events before that revision). It never writes over what since handed out: only
// past a chunk's length, or into a new array.
func (t *tail) add(events []eventstore.RecordedEvent, gone map[string]uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(gone) > 0 {
		t.forget(gone)
	}
	for _, e := range events {
		t.bytes += size(e)
	}
	t.events += len(events)
	for len(events) > 0 {
		last := len(t.chunks) - 1
		if last < 0 || len(t.chunks[last]) == cap(t.chunks[last]) {
			t.chunks = append(t.chunks, make([]eventstore.RecordedEvent, 0, tailChunk))
			last++
		}
		n := min(len(events), cap(t.chunks[last])-len(t.chunks[last]))
		t.chunks[last] = append(t.chunks[last], events[:n]...)
		events = events[n:]
	}
	for t.events > tailEvents && len(t.chunks) > 1 {
		t.drop(len(t.chunks[0]))
	}
	for t.bytes > tailBytes {
		t.drop(max(t.events/2, 1))
	}
}

// forget drops the events that are gone, into a new array if it holds any.
func (t *tail) forget(before map[string]uint64) {
	gone := func(e eventstore.RecordedEvent) bool { b, ok := before[e.Stream]; return ok && e.Revision < b }
	if !slices.ContainsFunc(t.chunks, func(c []eventstore.RecordedEvent) bool { return slices.ContainsFunc(c, gone) }) {
		return
	}
	kept := make([]eventstore.RecordedEvent, 0, t.events)
	t.bytes = 0
	for _, c := range t.chunks {
		for _, e := range c {
			if !gone(e) {
				kept = append(kept, e)
				t.bytes += size(e)
			}
		}
	}
	t.chunks, t.events = [][]eventstore.RecordedEvent{kept[:len(kept):len(kept)]}, len(kept)
	if len(kept) == 0 {
		t.chunks = nil
	}
}

// drop lets the oldest n events go: whole chunks, or the start of one, whose rest is copied.
func (t *tail) drop(n int) {
	for n > 0 && len(t.chunks) > 0 {
		c := t.chunks[0]
		k := min(n, len(c))
		for _, e := range c[:k] {
			t.bytes -= size(e)
		}
		t.from = c[k-1].Position.Commit
		t.events -= k
		n -= k
		if k == len(c) {
			t.chunks[0] = nil
			t.chunks = t.chunks[1:]
		} else {
			// The rest into an array of its own: c's would keep the dropped events' bytes
			// alive, past tailBytes, as long as any of c is kept.
			t.chunks[0] = slices.Clone(c[k:])
		}
	}
}

func size(e eventstore.RecordedEvent) int { return len(e.Data) + len(e.Metadata) }
