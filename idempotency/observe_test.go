package idempotency_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/idempotency"
)

// recorder collects what Keys.Observe hears.
type recorder struct {
	mu     sync.Mutex
	events []idempotency.Event
	hashes map[string]bool
}

func (r *recorder) observe(_ context.Context, e idempotency.Event, keyHash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.hashes == nil {
		r.hashes = map[string]bool{}
	}
	r.hashes[keyHash] = true
}

// take returns the events heard since the last take.
func (r *recorder) take() []idempotency.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func TestObserveFollowsTheKeysLife(t *testing.T) {
	keys, clk, _ := newKeys(t)
	rec := &recorder{}
	keys.Observe = rec.observe
	ctx := context.Background()
	step := func(what string, want ...idempotency.Event) {
		t.Helper()
		if got := rec.take(); !slices.Equal(got, want) {
			t.Errorf("%s: heard %v, want %v", what, got, want)
		}
	}

	claim, _, err := keys.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	step("first request", idempotency.EventClaimed)
	keys.Begin(ctx, request("fp"))
	step("duplicate while held", idempotency.EventWaited, idempotency.EventInFlight)
	keys.Begin(ctx, request("other"))
	step("another request", idempotency.EventMismatched)
	if err := keys.Complete(ctx, claim, created); err != nil {
		t.Fatal(err)
	}
	step("complete", idempotency.EventCompleted)
	keys.Begin(ctx, request("fp"))
	step("retry", idempotency.EventReplayed)

	r := request("fp")
	r.Key = "k2"
	c, _, err := keys.Begin(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, c, "503"); err != nil {
		t.Fatal(err)
	}
	step("claim and release", idempotency.EventClaimed, idempotency.EventReleased)
	if _, _, err := keys.Begin(ctx, r); err != nil {
		t.Fatal(err)
	}
	step("after release", idempotency.EventTakenOver)

	clk.Add(2 * time.Hour)
	if _, _, err := keys.Begin(ctx, request("fp")); err != nil {
		t.Fatal(err)
	}
	step("after the TTL", idempotency.EventExpired, idempotency.EventClaimed)

	want := map[string]bool{
		idempotency.KeyHash("shop-1", "k1"): true,
		idempotency.KeyHash("shop-1", "k2"): true,
	}
	if len(rec.hashes) != len(want) || !rec.hashes[idempotency.KeyHash("shop-1", "k1")] || !rec.hashes[idempotency.KeyHash("shop-1", "k2")] {
		t.Errorf("heard key hashes %v, want those of k1 and k2: %v", rec.hashes, want)
	}
}
