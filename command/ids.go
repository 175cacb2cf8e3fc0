package command

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// OrderIDs draws order ids: ULIDs from a monotonic entropy source, so that ids drawn in the
// same millisecond still sort in the order they were drawn. Safe for concurrent use.
type OrderIDs struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewOrderIDs returns a generator seeded from crypto/rand.
func NewOrderIDs() *OrderIDs {
	return &OrderIDs{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// New returns a new order id for time now.
func (g *OrderIDs) New(now time.Time) ulid.ULID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(now), g.entropy)
}
