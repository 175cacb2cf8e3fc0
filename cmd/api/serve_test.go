package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
)

// failingDeletes refuses every stream delete while failing is set, as a full disk would.
type failingDeletes struct {
	eventstore.Store
	failing atomic.Bool
}

func (s *failingDeletes) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if s.failing.Load() {
		return errors.New("database or disk is full")
	}
	return s.Store.DeleteStream(ctx, stream, expected)
}

// The service is not ready while its key sweeper keeps failing, with the cause, and ready again
// once it sweeps.
func TestReadinessReportsTheKeySweeper(t *testing.T) {
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store := &failingDeletes{Store: s}
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	idem := &idempotency.Keys{Store: store, TTL: time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }}
	ctx := context.Background()
	c, _, err := idem.Begin(ctx, idempotency.Request{Principal: "p", Key: "k", Method: "POST", Path: "/v1/orders", Fingerprint: "fp", Claimant: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := idem.Complete(ctx, c, idempotency.Outcome{Status: 201}); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Hour)) // the key has expired
	store.failing.Store(true)
	sweepCtx, stop := context.WithCancel(ctx)
	swept := make(chan error, 1)
	go func() { swept <- idem.Sweep(sweepCtx, s, 5*time.Millisecond) }()
	defer func() {
		stop()
		if err := <-swept; err != nil {
			t.Errorf("Sweep: %v", err)
		}
	}()

	ready := withSweeper(func(context.Context) error { return nil }, idem)
	waitUntil(t, "not ready", func() bool { return ready(ctx) != nil })
	if err := ready(ctx); !strings.Contains(err.Error(), "key sweeper") || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("readiness: %v; want the key sweeper named, with the store's error", err)
	}
	store.failing.Store(false)
	waitUntil(t, "ready again", func() bool { return ready(ctx) == nil })
}

func waitUntil(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 10s", what)
		}
	}
}
