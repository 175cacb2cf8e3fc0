package tests

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/acme/orders/internal/syncbuf"
)

// The end-to-end cases that matter most for several nodes, on each store that nodes share:
// two API processes share one KurrentDB or one PostgreSQL database, each with read models of
// its own. The KurrentDB is the test server of eventstore/kurrent/kurrenttest, run as a process
// with a data directory per test; PostgreSQL is a real server (eventstore/postgres/pgtest) with
// a database per test: the cases use fixed keys, so they need a store of their own.

var testServerBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// kurrentURL starts a KurrentDB test server process on a fresh data directory, stopped when
// the test ends, and returns its connection string.
func kurrentURL(t *testing.T) string {
	t.Helper()
	b := &testServerBuild
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(filepath.Dir(binary), "kurrent-testserver")
		build := exec.Command("go", "build", "-o", b.path, "./eventstore/kurrent/kurrenttest/cmd/testserver")
		build.Dir = root
		b.out, b.err = build.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build the KurrentDB test server: %v\n%s", b.err, b.out)
	}
	cmd := exec.Command(b.path, "-addr", "127.0.0.1:0", "-data", t.TempDir())
	stdout := newLineWatcher("listening on ")
	stderr := new(syncbuf.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("KurrentDB test server: %v; stderr: %s", err, stderr.String())
			}
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			t.Errorf("KurrentDB test server did not stop within %v", stopTimeout)
		}
	})
	select {
	case line := <-stdout.found:
		return strings.TrimPrefix(line, "listening on ")
	case err := <-exited:
		t.Fatalf("KurrentDB test server exited (%v): %s", err, stderr.String())
	case <-time.After(startTimeout):
		t.Fatalf("KurrentDB test server did not start within %v", startTimeout)
	}
	panic("unreachable")
}

func kurrentArgs(url string, more ...string) []string {
	return append([]string{"--store", "kurrentdb", "--kurrentdb-url", url}, more...)
}

// sharedStore is a store that several API nodes share: open starts a fresh one for the test
// and returns the flags of a node on it.
type sharedStore struct {
	name string
	open func(t *testing.T) func(more ...string) []string
}

// sharedStores are the stores of several nodes: the KurrentDB test server, and a database of a
// throwaway PostgreSQL server (eventstore/postgres/pgtest).
var sharedStores = []sharedStore{
	{"kurrentdb", func(t *testing.T) func(...string) []string {
		url := kurrentURL(t)
		return func(more ...string) []string { return kurrentArgs(url, more...) }
	}},
	{"postgres", func(t *testing.T) func(...string) []string {
		url := pgtest.Start(t).NewDatabase(t)
		return func(more ...string) []string {
			return append([]string{"--store", "postgres", "--postgres-url", url}, more...)
		}
	}},
}

// onSharedStores runs test on a fresh store of each kind, in parallel; args gives the flags of
// a node on it.
func onSharedStores(t *testing.T, test func(t *testing.T, args func(more ...string) []string)) {
	for _, s := range sharedStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.open(t))
		})
	}
}

// sharedNodes is how many API nodes the tests of several nodes run on one store.
const sharedNodes = 3

// startNodes starts sharedNodes API nodes with args.
func startNodes(t *testing.T, args []string) []*server {
	nodes := make([]*server, sharedNodes)
	for i := range nodes {
		nodes[i] = startServer(t, "", args...)
	}
	return nodes
}

// Many identical keyed creates, sent at once to several API nodes on one shared store: one
// order.
func TestConcurrentCreatesOnSeveralNodes(t *testing.T) {
	t.Parallel()
	onSharedStores(t, testConcurrentCreatesOnSeveralNodes)
}

func testConcurrentCreatesOnSeveralNodes(t *testing.T, args func(...string) []string) {
	nodes := startNodes(t, args())
	const key = "one-key-two-nodes"
	const n = 100
	outs := make([]outcome, n)
	start := make(chan struct{})
	deadline := time.Now().Add(requestTimeout)
	var wg sync.WaitGroup
	for i := range n {
		outs[i].req = request{method: "POST", path: "/v1/orders", key: key, body: orderFor("c-two-nodes")}
		node := nodes[i%len(nodes)]
		wg.Go(func() {
			<-start
			outs[i].res, outs[i].inFlight, outs[i].err = node.sendSettled(t, outs[i].req, deadline)
		})
	}
	close(start)
	wg.Wait()

	var first *response
	originals := 0
	for i, o := range outs {
		if o.err != nil {
			t.Errorf("request %d (node %d): %v", i, i%len(nodes), o.err)
			continue
		}
		if o.res.status != http.StatusCreated {
			t.Errorf("request %d (node %d): %v; want 201", i, i%len(nodes), o.res)
			continue
		}
		if o.res.replayed() == "" {
			originals++
		}
		if first == nil {
			first = o.res
		} else if !bytes.Equal(o.res.body, first.body) || o.res.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("request %d (node %d) got another order:\n%s\nwant\n%s", i, i%len(nodes), o.res.body, first.body)
		}
	}
	if originals != 1 {
		t.Errorf("%d responses without Idempotent-Replayed; want exactly 1 across the nodes", originals)
	}
	if first == nil {
		t.FailNow()
	}
	id := createdID(t, first)
	for i, node := range nodes {
		evs := node.events(t, id)
		if count(evs, "order.created.v2", "", "") != 1 || int64(len(evs)) != first.num("version") {
			t.Errorf("node %d: order %s has events %v; want one set: created and one line added", i, id, types(evs))
		}
	}
}

// One node dies after appending the order's events but before storing the outcome, or right
// after claiming the key; the retry goes to the other node, which completes the record from the
// order's events, or takes the claim over, and the command takes effect once.
func TestCrashRetriedOnOtherNode(t *testing.T) {
	t.Parallel()
	for _, store := range sharedStores {
		for _, hook := range []string{crashAfterAppend, crashAfterClaim} {
			for _, tc := range crashCases {
				t.Run(store.name+"/"+hook+"/"+tc.name, func(t *testing.T) {
					t.Parallel()
					testCrashRetriedOnOtherNode(t, store.open(t)("--key-lease", "500ms", "--key-wait", "300ms"), hook, tc)
				})
			}
		}
	}
}

func testCrashRetriedOnOtherNode(t *testing.T, flags []string, hook string, tc crashCase) {
	dying := &server{dir: t.TempDir(), args: flags}
	req := crash(t, dying, hook, tc)
	other := startServer(t, "", flags...)

	r, inFlight, err := other.sendSettled(t, req, time.Now().Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, tc.status)
	if hook == crashAfterAppend && r.replayed() != "true" {
		t.Errorf("retry on the other node: Idempotent-Replayed %q; want \"true\" (the command had run)", r.replayed())
	}
	if hook == crashAfterClaim {
		t.Logf("taken over after %d answers of 409 in-flight", inFlight)
		checkFirst(t, r)
	}
	tc.check(t, other, r)
	checkReplay(t, r, other.do(t, req.method, req.path, req.key, req.body))
	dying.restart(t)
	checkReplay(t, r, dying.do(t, req.method, req.path, req.key, req.body))
}

// On KurrentDB a key expires through its stream's $maxAge: once the key's
// events are hidden, a request with the key and another body is a new request, on any node,
// and the other node replays that one rather than its memory of the first.
func TestKurrentKeyExpiresByMaxAge(t *testing.T) {
	t.Parallel()
	url := kurrentURL(t)
	// Long enough that the second request below comes within it on a busy machine (with 1 s
	// it sometimes did not), short enough to wait for.
	const ttl = 3 * time.Second
	nodes := []*server{startServer(t, "", kurrentArgs(url, "--key-ttl", ttl.String())...), startServer(t, "", kurrentArgs(url, "--key-ttl", ttl.String())...)}
	const key = "maxage-key"
	sent := time.Now()
	first := nodes[0].do(t, "POST", "/v1/orders", key, orderFor("c-maxage-1"))
	wantStatus(t, first, http.StatusCreated)
	// Within the TTL the key is the first request's. A machine slow enough to answer this one
	// after the TTL has ended may give it the key's next life: then it tells nothing, and the
	// loop below waits for that life to end too.
	other := nodes[1].do(t, "POST", "/v1/orders", key, orderFor("c-maxage-3"))
	if elapsed := time.Since(sent); elapsed < ttl {
		checkProblem(t, other, http.StatusUnprocessableEntity, "idempotency-key-reused")
	} else {
		t.Logf("another body with the key answered %v after the first request, past the TTL: %d", elapsed, other.status)
	}

	// Past the key's TTL and its $maxAge (whole seconds from each event), its events are
	// hidden: Begin meets a stream that reads as not found, not an expired claim to delete.
	time.Sleep(2 * ttl)
	var second *response
	for deadline := time.Now().Add(20 * time.Second); ; {
		second = nodes[1].do(t, "POST", "/v1/orders", key, orderFor("c-maxage-2"))
		if second.status == http.StatusCreated {
			break
		}
		checkProblem(t, second, http.StatusUnprocessableEntity, "idempotency-key-reused")
		if t.Failed() || time.Now().After(deadline) {
			t.Fatalf("key %s still bound to its first request 20s after its TTL of %v", key, ttl)
		}
		time.Sleep(100 * time.Millisecond) // the TTL is about time: poll it
	}
	checkFirst(t, second)
	if createdID(t, second) == createdID(t, first) {
		t.Fatalf("the new request with the expired key got the first order %s", createdID(t, first))
	}
	checkReplay(t, second, nodes[0].do(t, "POST", "/v1/orders", key, orderFor("c-maxage-2")))
}

// Distinct commands on one order spread over several API nodes on one shared store: each node
// runs its own one after another, and the optimistic append guards between them. Every command
// is applied once; one refused because the other nodes kept winning says when to retry.
func TestConcurrentCommandsOnOneOrderOnSeveralNodes(t *testing.T) {
	t.Parallel()
	onSharedStores(t, testConcurrentCommandsOnOneOrderOnSeveralNodes)
}

func testConcurrentCommandsOnOneOrderOnSeveralNodes(t *testing.T, args func(...string) []string) {
	nodes := startNodes(t, args())
	id, _ := nodes[0].create(t, "create-two-node-order", "c-two-node-order")
	const n = 40
	applied := 1 // the create's line
	for i, o := range addsAtOnce(t, nodes, id, n) {
		switch {
		case o.err != nil:
			t.Errorf("add %d: %v", i, o.err)
		case o.res.status == http.StatusOK:
			applied++
		case o.res.status == http.StatusConflict && o.res.header.Get("Retry-After") != "":
			checkProblem(t, o.res, http.StatusConflict, "concurrent-modification")
		default:
			t.Errorf("add %d (node %d): %v; want 200, or 409 with Retry-After", i, i%len(nodes), o.res)
		}
	}
	for i, node := range nodes {
		evs := node.events(t, id)
		if got := count(evs, "order.line-added.v2", "", ""); got != applied {
			t.Errorf("node %d: %d lines added in the order's events, want %d (each answered 200, once)", i, got, applied)
		}
	}
}
