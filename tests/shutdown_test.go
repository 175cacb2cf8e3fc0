package tests

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SIGTERM while commands are in flight: every command acknowledged with a 2xx has its outcome
// recorded under its key (not only its effect in the order's stream), and every command that
// got no answer left neither a claim nor an effect. TestGracefulShutdownKeepsAcknowledgedCommands
// checks replays; this checks the records a restart finds before anyone retries.
func TestGracefulShutdownLeavesNothingHalfDone(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 40
	orders := make([]string, n)
	for i := 1; i < n; i += 2 {
		orders[i], _ = s.create(t, fmt.Sprintf("half-setup-%02d", i), "c-half")
	}
	reqs := make([]request, n)
	for i := range n {
		key := fmt.Sprintf("half-%02d", i)
		if i%2 == 0 {
			reqs[i] = request{method: "POST", path: "/v1/orders", key: key, body: orderFor(fmt.Sprintf("c-half-%02d", i))}
		} else {
			reqs[i] = request{method: "POST", path: "/v1/orders/" + orders[i] + "/lines", key: key, body: line{SKU: "sku-half", Quantity: 1, UnitPrice: 100}}
		}
	}
	res := make([]*response, n)
	errs := make([]error, n)
	acked := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = s.send(t, reqs[i])
			if errs[i] == nil && res[i].status/100 == 2 {
				once.Do(func() { close(acked) })
			}
		})
	}
	select {
	case <-acked:
	case <-time.After(requestTimeout):
		t.Fatal("no command was acknowledged")
	}
	s.signal(t, syscall.SIGTERM)
	wg.Wait()
	if st := s.wait(t, stopTimeout); !st.Success() {
		t.Fatalf("after SIGTERM the server exited with %v; want status 0", st)
	}
	s.restart(t)

	answered := 0
	for i, req := range reqs {
		k := s.do(t, "GET", "/v1/idempotency-keys/"+req.key, "", nil)
		switch {
		case errs[i] == nil && res[i].status/100 == 2:
			answered++
			wantStatus(t, k, 200)
			if got := k.num("status"); got != int64(res[i].status) {
				t.Errorf("key %s was answered %d, and its record after the restart is %v: the outcome was not recorded", req.key, res[i].status, k)
			}
		case errs[i] == nil:
			t.Errorf("%s during shutdown: %v; want 2xx or no answer", req.key, res[i])
		default:
			// No answer: it must not have run, not even half.
			if k.status != 404 {
				t.Errorf("key %s got no answer (%v), but a restart finds it %v: a claim or an effect without its answer", req.key, errs[i], k)
			}
			if i%2 == 1 {
				if o := s.order(t, orders[i]); o.num("version") != 2 {
					t.Errorf("order %s after an unanswered add line: %v; want it unchanged", orders[i], o)
				}
			}
		}
	}
	t.Logf("%d of %d commands acknowledged before the shutdown", answered, n)

	// Every command retried: a replay if it was acknowledged, a first run otherwise.
	for i, req := range reqs {
		again := s.do(t, req.method, req.path, req.key, req.body)
		if errs[i] == nil && res[i].status/100 == 2 {
			checkReplay(t, res[i], again)
		} else {
			checkFirst(t, again)
			wantStatus(t, again, map[bool]int{true: 201, false: 200}[i%2 == 0])
		}
	}
}
