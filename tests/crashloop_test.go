package tests

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/api/apitest"
	"github.com/acme/orders/tests/load"
)

// Clients run order lifecycles (retries with the same key, concurrent copies, payment
// callbacks delivered many times) while the server is SIGKILLed at random moments and started
// again on the same data directory; every client retries its command with the same key until
// it is answered. At the end every order is read back: no acknowledged command is lost, none
// took effect twice, every replay equals the first answer; and after a graceful stop the audit
// verifier (api audit verify) finds the hash chains, the order invariants and the read models
// sound.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	// A short lease: a claim whose holder was killed is taken over within a second.
	s := startServer(t, "", "--key-lease", "1s", "--key-wait", "500ms")
	crashLoop(t, []*server{s})
	s.current().stop(t)
	verify := exec.Command(binary, "audit", "verify", "--data", s.dir)
	verify.Env = hermeticEnv()
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("api audit verify --data %s: %v\n%s", s.dir, err, tail(string(out), 8<<10))
	} else {
		t.Logf("api audit verify: clean. %s", tail(string(out), 1<<10))
	}
}

// crashLoop runs order lifecycles spread over nodes while one of them at a time, at random, is
// SIGKILLed and started again, then checks the ledger and the replays of every command.
func crashLoop(t *testing.T, nodes []*server) {
	kills := soakSize(3, 20)
	const clients = 16
	stop := make(chan struct{})
	var next atomic.Uint64
	cfg := load.Config{
		URL:         func() string { return nodes[next.Add(1)%uint64(len(nodes))].url("") },
		Transport:   apitest.Transport(t, load.NewTransport(clients)),
		Clients:     clients,
		Duration:    time.Hour, // until stop
		RetryShare:  0.2,
		Deliveries:  3,
		CancelShare: 0.15, FailShare: 0.1, RefundShare: 0.3,
		Seed:     rand.Uint64(),
		Run:      "crash",
		Patience: time.Minute, // across restarts
		Stop:     stop,
	}
	t.Logf("seed %d, %d kills, %d nodes", cfg.Seed, kills, len(nodes))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		res    *load.Result
		runErr error
		wg     sync.WaitGroup
	)
	wg.Go(func() { res, runErr = load.Run(ctx, cfg) })

	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	for i := range kills {
		// A random moment: while commands are claimed, appended, completed or replayed.
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		s := nodes[rng.IntN(len(nodes))]
		s.kill(t)
		t.Logf("kill %d: a server died by SIGKILL", i+1)
		s.start(t)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if runErr != nil {
		t.Fatalf("load: %v", runErr)
	}
	checkLedger(t, ctx, cfg, res)
}

// checkLedger checks a load run's ledger against the orders and replays every command.
func checkLedger(t *testing.T, ctx context.Context, cfg load.Config, res *load.Result) {
	st := res.Stats
	t.Logf("%d commands acknowledged, %d requests answered (%d replays, %d 409s), %d unanswered and retried",
		st.Commands, st.Requests, st.Replays, st.Conflicts, st.Unanswered)
	for _, e := range st.Samples {
		t.Errorf("load: %s", e)
	}
	if st.Errors > len(st.Samples) {
		t.Errorf("load: %d errors in all", st.Errors)
	}

	rep, err := load.Verify(ctx, cfg, res.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verified %d orders, %d commands acknowledged, %d never answered, %d events", rep.Orders, rep.Commands, rep.Unknown, rep.Events)
	if rep.Orders == 0 {
		t.Error("no order was created")
	}
	if !rep.OK() {
		t.Errorf("%d lost, %d applied twice, %d mismatched, %d phantom", rep.Lost, rep.Duplicated, rep.Mismatched, rep.Phantoms)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}

	replays, err := load.Replay(ctx, cfg, res.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if replays.Errors > 0 {
		t.Errorf("%d of %d replays differ from the first answer", replays.Errors, replays.Commands)
	}
	for _, e := range replays.Samples {
		t.Error(e)
	}
}
