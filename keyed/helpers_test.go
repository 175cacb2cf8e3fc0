package keyed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/lease"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func newKeys(t *testing.T) (*idempotency.Keys, *clock, *sqlite.Store) {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	clk := &clock{now: time.Now()}
	return &idempotency.Keys{Store: s, TTL: time.Hour, Lease: lease.Terms{Length: 10 * time.Second, Node: "test"}, Wait: 50 * time.Millisecond, Now: clk.Now}, clk, s
}

func request(fingerprint string) idempotency.Request {
	return idempotency.Request{
		Principal: "shop-1", Key: "k1", Method: "POST", Path: "/v1/orders", Fingerprint: fingerprint,
		OrderID: "order-" + fingerprint, Claimant: "test/r",
	}
}

// keyEvents are the types of the events of r's key stream.
func keyEvents(t *testing.T, s eventstore.Store, r idempotency.Request) []string {
	t.Helper()
	var types []string
	for e, err := range s.ReadStream(context.Background(), idempotency.StreamName(r.Principal, r.Key), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	return types
}
