package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// remembered is a completed key as stored: what a replay needs without reading the stream.
// An outcome too large to keep in memory is left in the store (onDisk): its replay reads it
// there, and the memory spares it only the claim and the command it would run otherwise.
type remembered struct {
	fingerprint string
	expiresAt   time.Time
	outcome     Outcome
	onDisk      bool
}

// RememberDefault is how many bytes of completed keys a Keys keeps in memory unless told
// otherwise: an eighth of them for keys read back from the store (see memory).
const RememberDefault = 64 << 20

// Whatever a remembered key takes beyond its strings: the LRU's list entry and map slot, the
// headers map, string headers. Charged generously: measured by BenchmarkRememberedBytes.
const (
	entryOverhead  = 512
	headerOverhead = 64
)

// largestRemembered is the largest body of an outcome kept in memory, unless the cache's
// budget is under 64 times that: a few large answers would push out the many small ones, and
// their replays cost the read of their body anyway.
const largestRemembered = 64 << 10

// size is what remembering r under stream costs in memory, in bytes.
func (r remembered) size(stream string) int64 {
	n := entryOverhead + len(stream) + len(r.fingerprint) + len(r.outcome.Body)
	for h, v := range r.outcome.Headers {
		n += headerOverhead + len(h) + len(v)
	}
	return int64(n)
}

// completed is the memory of completed keys: their outcomes, bounded in bytes, so that their
// replays read nothing from the store (see memory).
type completed struct {
	once       sync.Once
	here, read *byteLRU // keys completed here; keys read back from the store
}

// byteLRU is a least-recently-used cache of remembered keys bounded by the bytes they take
// (remembered.size): the LRU bounds only a count.
type byteLRU struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, remembered]
	bytes   int64
	budget  int64
	largest int64 // outcomes above are kept on disk only
}

func newByteLRU(budget int64) *byteLRU {
	c := &byteLRU{budget: budget, largest: min(largestRemembered, budget/64)}
	// The count never binds before the bytes: no entry costs less than its overhead.
	c.lru, _ = simplelru.NewLRU(int(max(budget/entryOverhead, 1)), func(stream string, r remembered) {
		c.bytes -= r.size(stream)
	})
	return c
}

// add remembers r under stream, its outcome left on disk if it is too large, and forgets the
// least recently used keys until the cache is within its budget again.
func (c *byteLRU) add(stream string, r remembered) {
	if int64(len(r.outcome.Body)) > c.largest {
		r.outcome, r.onDisk = Outcome{}, true
	}
	n := r.size(stream)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(stream) // Add would replace it without the eviction callback
	if n > c.budget {
		return // not even the key without its outcome fits
	}
	c.lru.Add(stream, r)
	c.bytes += n
	for c.bytes > c.budget {
		c.lru.RemoveOldest()
	}
}

func (c *byteLRU) get(stream string) (remembered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(stream)
}

func (c *byteLRU) remove(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(stream)
}

func (c *byteLRU) size() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// memory returns the cache of keys completed here, or nil if RememberBytes turned it off, and
// the cache of keys read from the store for a replay, with an eighth of the budget. Were they
// one, the replays of keys older than the memory holds, oldest first (a client sending its
// backlog again, the load harness's replay phase), would each push out the oldest key
// remembered, which is the one the next replays ask for: every one of them would read the
// store (an LRU cache's sequential scan). Kept apart, the keys read push out only each other.
func (k *Keys) memory() (done, read *byteLRU) {
	m := &k.completed
	m.once.Do(func() {
		n := k.RememberBytes
		if n == 0 {
			n = RememberDefault
		}
		if n > 0 {
			m.read = newByteLRU(max(n/8, 1))
			m.here = newByteLRU(max(n-n/8, 1))
		}
	})
	return m.here, m.read
}

// RememberedBytes returns how many bytes the completed keys kept in memory take, as charged
// against RememberBytes.
func (k *Keys) RememberedBytes() int64 {
	done, read := k.memory()
	return done.size() + read.size()
}

// remember keeps the outcome stored in a key's stream for later replays, with the keys
// completed here, or with those read from the store if read is set. A completed key never
// changes until it expires, so what is kept stays true on every node.
func (k *Keys) remember(stream string, first Claimed, done *Completed, read bool) {
	here, fromStore := k.memory()
	if here == nil || done == nil {
		return
	}
	m := here
	if read {
		m = fromStore
	}
	m.add(stream, remembered{fingerprint: first.Fingerprint, expiresAt: first.ExpiresAt, outcome: done.Outcome})
}

// recall returns the completed key stream as remembered, unless it is unknown here or has
// expired.
func (k *Keys) recall(stream string, now time.Time) (remembered, bool) {
	here, fromStore := k.memory()
	if here == nil {
		return remembered{}, false
	}
	m := here
	r, ok := here.get(stream)
	if !ok {
		m = fromStore
		r, ok = fromStore.get(stream)
	}
	if ok && !r.expiresAt.After(now) {
		m.remove(stream)
		return remembered{}, false
	}
	return r, ok
}

// outcomeOnDisk reads the outcome of a completed key that memory left in the store, or nil if
// the stream no longer holds the outcome remembered (expired, and claimed anew since), which
// is then forgotten.
func (k *Keys) outcomeOnDisk(ctx context.Context, stream string, r remembered) (*Outcome, error) {
	st, err := k.read(ctx, stream)
	if err != nil {
		return nil, err
	}
	if st.done == nil || st.first.Fingerprint != r.fingerprint || !st.first.ExpiresAt.Equal(r.expiresAt) {
		here, fromStore := k.memory()
		here.remove(stream)
		fromStore.remove(stream)
		return nil, nil
	}
	return &st.done.Outcome, nil
}
