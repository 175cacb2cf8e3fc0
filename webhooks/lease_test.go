package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
)

// lastHolder is the node of the endpoint's last checkpoint, and every node that ever appended
// one.
func lastHolder(t *testing.T, store eventstore.Store, id string) (string, map[string]bool) {
	t.Helper()
	last, all := "", map[string]bool{}
	for e, err := range store.ReadStream(context.Background(), deliveryPrefix+id, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var cp Checkpoint
		if err := json.Unmarshal(e.Data, &cp); err != nil {
			t.Fatal(err)
		}
		last, all[cp.Node] = cp.Node, true
	}
	return last, all
}

// A node whose wall clock is an hour ahead of the holder's does not take the lease over while
// the holder renews it, and one whose clock is an hour behind does not wait for it: a node takes
// over once it has seen the checkpoint unchanged for the lease by its own monotonic clock.
func TestLeaseTakeoverNeedsNoClockAgreement(t *testing.T) {
	for name, skew := range map[string]time.Duration{"ahead": time.Hour, "behind": -time.Hour} {
		t.Run(name, func(t *testing.T) {
			store := openStore(t)
			ctx := context.Background()
			cfg := DefaultConfig()
			// A lease long enough that the holder's renewals, a third of it apart, are not late
			// on a machine busy with other tests: a late renewal is a takeover by design.
			cfg.Lease, cfg.Timeout, cfg.AllowPrivate = 2*time.Second, 500*time.Millisecond, true
			es := node(t, store, 10)
			es.Config = &cfg
			ep, err := register(ctx, es, "alice", "k", "http://127.0.0.1:9/hook", []string{AllEvents}, "")
			if err != nil {
				t.Fatal(err)
			}
			service := func(name string, skew time.Duration) *Service {
				return &Service{Store: store, Feed: store, Endpoints: es, Config: &cfg, Node: name,
					Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Now().Add(skew) }}
			}
			holderCtx, stopHolder := context.WithCancel(ctx)
			holderDone := make(chan struct{})
			go func() { service("a", 0).newRunner(ep.ID).run(holderCtx); close(holderDone) }()
			defer func() { stopHolder(); <-holderDone }()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if last, _ := lastHolder(t, store, ep.ID); last == "a" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the first node did not take the lease")
				}
			}
			takerCtx, stopTaker := context.WithCancel(ctx)
			takerDone := make(chan struct{})
			go func() { service("b", skew).newRunner(ep.ID).run(takerCtx); close(takerDone) }()
			defer func() { stopTaker(); <-takerDone }()

			time.Sleep(4 * cfg.Lease)
			if _, all := lastHolder(t, store, ep.ID); all["b"] {
				t.Fatal("the lease was taken over while its holder renewed it")
			}
			stopHolder()
			<-holderDone
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if last, _ := lastHolder(t, store, ep.ID); last == "b" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the lease was not taken over after its holder stopped")
				}
			}
		})
	}
}
