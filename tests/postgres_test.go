package tests

import (
	"fmt"
	"net/http"
	neturl "net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/postgres/pgtest"
)

// PostgreSQL stops at once (pg_ctl stop -m immediate) while two nodes take keyed creates: the
// requests meanwhile are answered 503 with Retry-After, never a 500, none later than the
// request bound; the nodes come back by themselves once it restarts; every key ends with one
// order, the one its first 201 named; and the audit verifier finds the log clean.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	pg := pgtest.StartOwn(t)
	url := pg.NewDatabase(t)
	args := []string{"--store", "postgres", "--postgres-url", url,
		"--postgres-connect-timeout", "1s", "--postgres-statement-timeout", "2s"}
	nodes := []*server{startServer(t, "", args...), startServer(t, "", args...)}

	var phase atomic.Value // "before", "during" or "after" the outage
	phase.Store("before")
	var mu sync.Mutex
	first := map[string]string{} // key → the order id of its first 201
	seen := map[string]map[int]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("outage-%d-%d", c, i)
				start, p := time.Now(), phase.Load().(string)
				r, err := nodes[i%2].send(t, request{method: "POST", path: "/v1/orders", key: key, body: orderFor("c-" + key)})
				if err != nil {
					t.Errorf("%s (%s the outage): %v", key, p, err)
					return
				}
				if took := time.Since(start); took > requestTimeout+5*time.Second {
					t.Errorf("%s (%s the outage) answered after %v", key, p, took)
				}
				mu.Lock()
				if seen[p] == nil {
					seen[p] = map[int]int{}
				}
				seen[p][r.status]++
				mu.Unlock()
				switch {
				case r.status == http.StatusCreated:
					mu.Lock()
					first[key] = createdID(t, r)
					mu.Unlock()
				case r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != "":
					mu.Lock()
					first[key] = "" // to send again once PostgreSQL is back
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				default:
					t.Errorf("%s (%s the outage): %v; want 201, or 503 with Retry-After", key, p, r)
				}
			}
		})
	}

	time.Sleep(time.Second)
	phase.Store("during")
	pg.Kill(t)
	time.Sleep(3 * time.Second)
	pg.Restart(t)
	phase.Store("after")
	waitFor(t, 30*time.Second, "creates answered 201 on both nodes after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["after"][http.StatusCreated] >= 20
	})
	close(stop)
	wg.Wait()
	t.Logf("answers by phase: %v", seen)
	if seen["during"][http.StatusServiceUnavailable] == 0 {
		t.Error("no request was answered 503 while PostgreSQL was down")
	}

	// Every key, sent again, has exactly the order its first 201 named, or one order now.
	for key, id := range first {
		r, _, err := nodes[1].sendSettled(t, request{method: "POST", path: "/v1/orders", key: key, body: orderFor("c-" + key)}, time.Now().Add(requestTimeout))
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, r, http.StatusCreated)
		if got := createdID(t, r); id != "" && got != id {
			t.Errorf("%s: order %s, but its first 201 named %s", key, got, id)
		}
	}
	if out, code := runAPI(t, "audit", "verify", "--store", "postgres", "--postgres-url", url, "--data", nodes[0].dir); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, out)
	}
}

// Clients run order lifecycles spread over three nodes on one PostgreSQL database, each
// command retried with its key on any node until it is answered, while one node at a time is
// SIGKILLed and started again: no acknowledged command is lost, none took effect twice, every
// replay equals the first answer, and the audit verifier finds the log sound.
func TestPostgresNodesKilledMidStorm(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t).NewDatabase(t)
	// A short lease: a claim whose node was killed is taken over once seen for a second.
	nodes := startNodes(t, []string{"--store", "postgres", "--postgres-url", url, "--key-lease", "1s", "--key-wait", "500ms"})
	crashLoop(t, nodes)
	if out, code := runAPI(t, "audit", "verify", "--store", "postgres", "--postgres-url", url, "--data", nodes[0].dir); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, tail(out, 8<<10))
	}
}

// The password of the PostgreSQL URL shows nowhere: not in the log of a node that runs on it,
// its metrics, the help that the environment's URL is in force for, nor the error of a start
// that cannot connect.
func TestPostgresPasswordStaysHidden(t *testing.T) {
	t.Parallel()
	const password = "Sekr1t-pw-42"
	u, err := neturl.Parse(pgtest.Start(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), password) // the test server trusts any
	s := startServer(t, "", "--store", "postgres", "--postgres-url", u.String())
	s.create(t, "password-create", "c-password")
	metrics := s.do(t, "GET", "/metrics", "", nil)
	wantStatus(t, metrics, http.StatusOK)

	unreachable := *u
	unreachable.Host = "127.0.0.1:1"
	help := exec.Command(binary, "serve", "--help")
	help.Env = append(hermeticEnv(), "API_STORE=postgres", "API_POSTGRES_URL="+u.String())
	helpOut, _ := help.CombinedOutput()
	failed, code := runAPI(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--store", "postgres",
		"--postgres-url", unreachable.String(), "--postgres-connect-timeout", "1s")
	if code == 0 {
		t.Errorf("a start on an unreachable database succeeded: %s", failed)
	}
	for what, text := range map[string]string{"the log": s.current().stderr.String(), "the metrics": string(metrics.body),
		"--help": string(helpOut), "the failed start": failed} {
		if strings.Contains(text, password) {
			t.Errorf("%s shows the password:\n%s", what, tail(text, 4<<10))
		}
	}
}
