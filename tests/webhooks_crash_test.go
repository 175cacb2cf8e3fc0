package tests

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/api/apitest"
	"github.com/acme/orders/tests/load"
)

// The server is SIGKILLed 3 times (10 in the soak) while 200 orders (1,000) of alice's go through their lives (and a
// few of bob's) and deliveries run: alice's endpoint receives every event of her orders at least
// once, every duplicate with the same webhook-id, so a receiver that stores ids has exactly one
// effect per event; an order's events are first acknowledged in their order; and neither
// endpoint ever receives the other client's orders.
func TestWebhooksSurviveCrashLoop(t *testing.T) {
	t.Parallel()
	// Retries for minutes, so that a slow machine's timeouts dead-letter nothing.
	pacing := webhookPacing(t, "0s,100ms,500ms,1s,2s,5s,10s,20s,30s,60s", "5s", "15s")
	s := startServer(t, "", append(pacing, "--keys-file", accessKeysFile(t), "--key-lease", "1s", "--key-wait", "500ms")...)
	ra, rb := newReceiver(t), newReceiver(t)
	idA, secretA := s.register(t, alice, "crash-a", ra.url)
	ra.setSecrets(secretA)
	_, secretB := s.register(t, bob, "crash-b", rb.url)
	rb.setSecrets(secretB)
	ra.setAnswer(func(d delivery, attempt int) (int, time.Duration) {
		if attempt == 1 && d.Revision%7 == 3 {
			return 503, 0 // a retry now and then
		}
		return 200, 0
	})

	crashOrders, crashKills := soakSize(200, 1000), soakSize(3, 10)
	seed := rand.Uint64()
	config := func(token, run string, orders int) load.Config {
		return load.Config{
			URL: func() string { return s.url("") }, Transport: apitest.Transport(t, load.NewTransport(32)), Token: token,
			Clients: 32, Orders: orders, RetryShare: 0.05, Deliveries: 1, CancelShare: 0.15, FailShare: 0.1, RefundShare: 0.2,
			Seed: seed, Run: run, Patience: time.Minute,
		}
	}
	ca, cb := config("alice-access-secret", "wa", crashOrders), config("bob-access-secret", "wb", 50)
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var resA, resB *load.Result
	var wg sync.WaitGroup
	wg.Go(func() { resA, _ = load.Run(ctx, ca) })
	wg.Go(func() { resB, _ = load.Run(ctx, cb) })

	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range crashKills {
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		s.kill(t)
		t.Logf("kill %d: %d events acknowledged at alice's receiver", i+1, ra.received())
		s.start(t)
	}
	wg.Wait()
	t.Logf("load done in %v", time.Since(began))
	if resA == nil || resB == nil {
		t.Fatal("a load run did not end")
	}

	expected := func(res *load.Result, caller []string) map[string]int {
		want := map[string]int{}
		for _, o := range res.Ledger.Orders() {
			if o.ID != "" {
				want[o.ID] = int(s.ok(t, caller, 200, "GET", "/v1/orders/"+o.ID, "", nil).num("version"))
			}
		}
		return want
	}
	wantA, wantB := expected(resA, alice), expected(resB, bob)
	total := func(want map[string]int) (n int) {
		for _, v := range want {
			n += v
		}
		return n
	}
	t.Logf("%d orders of alice's (%d events), %d of bob's (%d events)", len(wantA), total(wantA), len(wantB), total(wantB))
	defer func() {
		if t.Failed() {
			r := s.ok(t, alice, 200, "GET", "/v1/webhook-endpoints/"+idA+"/deliveries?status=failed&limit=3", "", nil)
			t.Logf("alice's receiver has %d events; pending: %s", ra.received(), r.body)
			shown := 0
			for id, n := range wantA {
				ra.mu.Lock()
				got := ra.perOrder[id]
				ra.mu.Unlock()
				if len(got) != n && shown < 3 {
					shown++
					ev := s.ok(t, alice, 200, "GET", "/v1/orders/"+id+"/events", "", nil)
					t.Logf("order %s: got %v; events %s", id, got, ev.body)
				}
			}
		}
	}()
	// Counted per order: events of creates the load saw no answer to are delivered too.
	all := func(r *receiver, want map[string]int) func() bool {
		return func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			for id, n := range want {
				if len(r.perOrder[id]) < n {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, time.Minute, "every event of alice's at her receiver", all(ra, wantA))
	waitFor(t, time.Minute, "every event of bob's at his receiver", all(rb, wantB))

	check := func(name string, r *receiver, want map[string]int, prefix string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, bad := range r.invalid {
			t.Errorf("%s: %s", name, bad)
		}
		dups := 0
		for id, n := range r.attempts {
			if _, ok := r.done[id]; ok && n > 1 {
				dups++
			}
		}
		t.Logf("%s: %d events, %d effects, %d attempted more than once", name, len(r.done), r.effects, dups)
		if r.effects != len(r.done) {
			t.Errorf("%s: %d effects for %d events", name, r.effects, len(r.done))
		}
		for _, d := range r.done {
			if !strings.HasPrefix(d.Data.Order.CustomerID, prefix) {
				t.Errorf("%s received order %s of customer %s, not its client's", name, d.OrderID, d.Data.Order.CustomerID)
			}
		}
		for id, n := range want {
			got := r.perOrder[id]
			if len(got) != n {
				t.Errorf("%s: order %s: revisions %v acknowledged, want 0 to %d", name, id, got, n-1)
				continue
			}
			for i, rev := range got {
				if rev != uint64(i) {
					t.Errorf("%s: order %s: revisions acknowledged in the order %v", name, id, got)
					break
				}
			}
		}
	}
	check("alice's receiver", ra, wantA, "cust-wa")
	check("bob's receiver", rb, wantB, "cust-wb")
}

// On the embedded store one server holds the data directory, so a restarted server takes its
// endpoints' deliveries over at once, whatever lease its previous run left, killed or stopped:
// an event appended after the restart is delivered within 2 s of it, well inside the 30 s lease.
func TestWebhooksDeliverAtOnceAfterARestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "", webhookPacing(t, "0s,50ms,100ms", "1s", "30s")...)
			rec := newReceiver(t)
			_, secret := s.register(t, nil, "hook", rec.url)
			rec.setSecrets(secret)
			s.create(t, "before", "c-before")
			waitFor(t, 10*time.Second, "the delivery before the restart", func() bool { return rec.received() == 2 })
			if how == "SIGKILL" {
				s.kill(t)
			} else {
				s.current().stop(t)
			}
			s.restart(t)
			start := time.Now()
			s.create(t, "after", "c-after")
			waitFor(t, 10*time.Second, "the delivery after the restart", func() bool { return rec.received() == 4 })
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the first delivery after the restart took %v; want it within 2 s", d)
			}
		})
	}
}
