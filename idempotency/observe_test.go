package idempotency_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/idempotency"
)

// recorder is a log handler that collects the steps of keys' lives that Keys logs.
type recorder struct {
	mu     sync.Mutex
	events []idempotency.Event
	hashes map[string]bool
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hashes == nil {
		r.hashes = map[string]bool{}
	}
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "event":
			r.events = append(r.events, idempotency.Event(a.Value.String()))
		case "key_hash":
			r.hashes[a.Value.String()] = true
		}
		return true
	})
	return nil
}

// logger is a logger whose lines rec collects.
func (r *recorder) logger() *slog.Logger { return slog.New(r) }

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
	keys.Log = rec.logger()
	ctx := context.Background()
	step := func(what string, want ...idempotency.Event) {
		t.Helper()
		if got := rec.take(); !slices.Equal(got, want) {
			t.Errorf("%s: heard %v, want %v", what, got, want)
		}
	}

	claim, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	step("first request", idempotency.EventClaimed)
	begin(ctx, keys, request("fp"))
	step("duplicate while held", idempotency.EventWaited, idempotency.EventInFlight)
	begin(ctx, keys, request("other"))
	step("another request while held", idempotency.EventWaited, idempotency.EventInFlight)
	if err := keys.Complete(ctx, claim, created); err != nil {
		t.Fatal(err)
	}
	step("complete", idempotency.EventCompleted)
	begin(ctx, keys, request("fp"))
	step("retry", idempotency.EventReplayed)
	begin(ctx, keys, request("other"))
	step("another request", idempotency.EventMismatched)

	r := request("fp")
	r.Key = "k2"
	c, _, err := begin(ctx, keys, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, c, "503"); err != nil {
		t.Fatal(err)
	}
	step("claim and release", idempotency.EventClaimed, idempotency.EventReleased)
	if _, _, err := begin(ctx, keys, r); err != nil {
		t.Fatal(err)
	}
	step("after release", idempotency.EventTakenOver)

	clk.Add(2 * time.Hour)
	if _, _, err := begin(ctx, keys, request("fp")); err != nil {
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
