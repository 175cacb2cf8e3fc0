// Package bytecache is a least-recently-used cache bounded by the bytes its values take, as
// each value's owner counts them: every cache of the service that holds values of unequal
// size (orders, answers of idempotency keys) is bounded this way, so that a flag in bytes is
// what it costs in memory.
package bytecache

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache holds values up to a budget of bytes; adding past it forgets the least recently used.
// It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[K, entry[V]]
	bytes  int64
	budget int64
}

type entry[V any] struct {
	v    V
	size int64
}

// New makes a cache of budget bytes. minSize is the least a value can cost (its overhead):
// the cache never holds more than budget/minSize values, whatever sizes they are said to have.
func New[K comparable, V any](budget, minSize int64) *Cache[K, V] {
	c := &Cache[K, V]{budget: budget}
	c.lru, _ = simplelru.NewLRU(int(max(budget/max(minSize, 1), 1)), func(_ K, e entry[V]) { c.bytes -= e.size })
	return c
}

// Add keeps v under k at size bytes, replacing what k held, and forgets the least recently
// used values until the cache is within its budget. A value larger than the whole budget is not
// kept; Add reports whether v was.
func (c *Cache[K, V]) Add(k K, v V, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.add(k, v, size)
}

func (c *Cache[K, V]) add(k K, v V, size int64) bool {
	c.lru.Remove(k) // Add would replace it without the eviction callback
	if size > c.budget {
		return false
	}
	c.lru.Add(k, entry[V]{v, size})
	c.bytes += size
	for c.bytes > c.budget {
		c.lru.RemoveOldest()
	}
	return true
}

// AddUnless keeps v under k as Add does, unless stale(held) for the value k holds: so that
// writers finishing out of order do not bring an older value back.
func (c *Cache[K, V]) AddUnless(k K, v V, size int64, stale func(held V) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.lru.Peek(k); ok && stale(e.v) {
		return false
	}
	return c.add(k, v, size)
}

// Get returns the value of k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(k)
	return e.v, ok
}

// RemoveIf forgets the value of k if drop(value) says so.
func (c *Cache[K, V]) RemoveIf(k K, drop func(held V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.lru.Peek(k); ok && drop(e.v) {
		c.lru.Remove(k)
	}
}

// Remove forgets the value of k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(k)
}

// Bytes is what the values held take, as their Adds counted them; 0 for a nil cache.
func (c *Cache[K, V]) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
