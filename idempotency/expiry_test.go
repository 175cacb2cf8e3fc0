package idempotency_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
)

// kurrentStore is the KurrentDB backend on a test server of its own.
func kurrentStore(t *testing.T) *kurrent.Store {
	t.Helper()
	srv, err := kurrenttest.Start("127.0.0.1:0", t.TempDir(), kurrenttest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s, err := kurrent.Open(kurrent.Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// On KurrentDB a key expires through its stream's $maxAge: once its events
// are past it, a request with the key is a new request, even with another fingerprint.
func TestKeyExpiresByMaxAge(t *testing.T) {
	s := kurrentStore(t)
	// RememberBytes: -1, so that every Begin asks the store.
	keys := &idempotency.Keys{Store: s, TTL: time.Second, Wait: 50 * time.Millisecond, RememberBytes: -1}
	// Begin would claim an expired key forever if the store refused its NoStream claim.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Complete(ctx, c, created); err != nil {
		t.Fatal(err)
	}
	if _, _, err := begin(ctx, keys, request("other")); !errors.Is(err, fault.KeyReused) {
		t.Fatalf("another request before expiry: %v; want ErrKeyReused", err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := first(s, c.Stream)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key's events are not hidden after 10s (read: %v): no $maxAge?", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	again, replay, err := begin(ctx, keys, request("other"))
	if err != nil || again == nil || replay != nil || again.Takeover || again.OrderID != "order-other" {
		t.Fatalf("another request after expiry: %+v, %+v, %v; want a new claim", again, replay, err)
	}
	if again.Expected != eventstore.Exact(2) {
		t.Errorf("new claim at %v; want revision 2, after the expired claim and outcome", again.Expected)
	}
	other := idempotency.Outcome{Status: 201, Body: "{\"id\":\"other\"}\n"}
	if err := keys.Complete(ctx, again, other); err != nil {
		t.Fatal(err)
	}
	if _, replay, err := begin(ctx, keys, request("other")); err != nil || replay == nil || replay.Body != other.Body {
		t.Fatalf("replay of the new request: %+v, %v", replay, err)
	}
	if _, _, err := begin(ctx, keys, request("fp")); !errors.Is(err, fault.KeyReused) {
		t.Fatalf("the first request after the key's new life: %v; want ErrKeyReused", err)
	}
}

// hidingFirst hides the first event of every stream from reads, as $maxAge does for a key's
// Claimed when a later Completed is still young enough to be read.
type hidingFirst struct{ *kurrent.Store }

func (h hidingFirst) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		for e, err := range h.Store.ReadStream(ctx, stream, opts) {
			if err == nil && e.Revision == 0 {
				continue
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// A key whose first claim is hidden (past $maxAge, which is at least the TTL) but whose outcome
// is not counts as expired, even by a clock that says otherwise: the request claims the key
// anew at the revision read, and the key is then the new claim's, its old outcome no longer.
func TestKeyWithoutItsFirstClaimIsExpired(t *testing.T) {
	s := kurrentStore(t)
	keys := &idempotency.Keys{Store: s, TTL: time.Hour, Wait: 50 * time.Millisecond, RememberBytes: -1}
	ctx := context.Background()
	c, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Complete(ctx, c, created); err != nil {
		t.Fatal(err)
	}

	keys.Store = hidingFirst{s}
	again, replay, err := begin(ctx, keys, request("other"))
	if err != nil || again == nil || replay != nil || again.Takeover {
		t.Fatalf("another request when the first claim is hidden: %+v, %+v, %v; want a new claim", again, replay, err)
	}
	if again.Expected != eventstore.Exact(2) {
		t.Errorf("new claim at %v; want revision 2", again.Expected)
	}
	other := idempotency.Outcome{Status: 201, Body: "{\"id\":\"other\"}\n"}
	if err := keys.Complete(ctx, again, other); err != nil {
		t.Fatal(err)
	}
	if _, replay, err := begin(ctx, keys, request("other")); err != nil || replay == nil || replay.Body != other.Body {
		t.Fatalf("replay of the new request: %+v, %v; want its own outcome", replay, err)
	}
}
