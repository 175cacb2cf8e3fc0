package tests

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
)

// The test hooks the server honours: when the variable equals a request's Idempotency-Key,
// the process SIGKILLs itself at that point of the request.
const (
	crashAfterAppend = "API_TEST_CRASH_AFTER_APPEND" // the order's events appended, the outcome not stored
	crashAfterClaim  = "API_TEST_CRASH_AFTER_CLAIM"  // the key claimed, the command not run
)

const crashKey = "crash-here"

// crashCase is a command to crash on: setup prepares its order (without crashing) and returns
// the request; check checks, after the retry answered r, that the command took effect once.
type crashCase struct {
	name   string
	status int
	setup  func(t *testing.T, s *server) request
	check  func(t *testing.T, s *server, r *response)
}

var crashCases = []crashCase{
	{
		name:   "create",
		status: http.StatusCreated,
		setup: func(*testing.T, *server) request {
			return request{method: "POST", path: "/v1/orders", key: crashKey, body: orderFor("c-crash")}
		},
		check: func(t *testing.T, s *server, r *response) {
			id := createdID(t, r)
			evs := s.events(t, id)
			if count(evs, "order.created.v2", "", "") != 1 || int64(len(evs)) != r.num("version") {
				t.Errorf("order %s has events %v; want created and one line added, once", id, types(evs))
			}
			checkKeyed(t, evs, crashKey)
			onlyOrderOf(t, s, "c-crash", id)
		},
	},
	{
		name:   "add line",
		status: http.StatusOK,
		setup: func(t *testing.T, s *server) request {
			id, _ := s.create(t, "crash-setup", "c-crash")
			return request{method: "POST", path: "/v1/orders/" + id + "/lines", key: crashKey, body: line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}}
		},
		check: func(t *testing.T, s *server, r *response) {
			id := r.str("id")
			if r.num("total") != orderTotal+500 || r.num("version") != 3 {
				t.Errorf("%v; want sku-2 added once: total %d, version 3", r, orderTotal+500)
			}
			evs := s.events(t, id)
			if count(evs, "order.line-added.v2", "sku", "sku-2") != 1 || len(evs) != 3 {
				t.Errorf("order %s has events %v; want sku-2 added once", id, types(evs))
			}
			checkKeyed(t, evs, crashKey)
		},
	},
}

// onlyOrderOf fails t unless id is the one order of customer that the orders read model
// lists once it has caught up with id: a create that crashed and was retried made one order,
// never two.
func onlyOrderOf(t *testing.T, s *server, customer, id string) {
	t.Helper()
	var mine []string
	listed := eventually(10*time.Second, func() bool {
		all, err := s.tryListAll(t, url.Values{})
		mine = mine[:0]
		for _, o := range all {
			if o.Customer == customer {
				mine = append(mine, o.ID)
			}
		}
		return err == nil && slices.Contains(mine, id)
	})
	if !listed || len(mine) != 1 {
		t.Errorf("the orders of %s: %v; want %s alone", customer, mine, id)
	}
}

// checkKeyed reports on t unless the last event carries key in its metadata.
func checkKeyed(t *testing.T, evs []event, key string) {
	t.Helper()
	if len(evs) > 0 && evs[len(evs)-1].Metadata["idempotencyKey"] != key {
		t.Errorf("last event's metadata %v; want idempotencyKey %q", evs[len(evs)-1].Metadata, key)
	}
}

// crash starts s with hook set to crashKey, sends the case's request and expects the
// process to die of SIGKILL without answering. It returns the request.
func crash(t *testing.T, s *server, hook string, tc crashCase) request {
	t.Helper()
	s.env = []string{hook + "=" + crashKey}
	s.start(t)
	req := tc.setup(t, s)
	if r, err := s.send(t, req); err == nil {
		t.Fatalf("%v; want no answer: the server should have killed itself (is %s honoured?)", r, hook)
	}
	if st := s.wait(t, stopTimeout); !killedBy(st, syscall.SIGKILL) {
		t.Fatalf("the server ended with %v; want killed by SIGKILL", st)
	}
	s.env = nil
	return req
}

// The server dies after appending the order's events but before storing the outcome: the
// retry after a restart completes the record from the events instead of running again.
func TestCrashAfterAppendBeforeOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range crashCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &server{dir: t.TempDir()}
			req := crash(t, s, crashAfterAppend, tc)
			s.restart(t)

			r := s.do(t, req.method, req.path, req.key, req.body)
			wantStatus(t, r, tc.status)
			if r.replayed() != "true" {
				t.Errorf("retry after the crash: Idempotent-Replayed %q; want \"true\" (the command had run)", r.replayed())
			}
			tc.check(t, s, r)
			checkReplay(t, r, s.do(t, req.method, req.path, req.key, req.body))
		})
	}
}

// The server dies right after claiming the key, before the command runs. The embedded store
// writes the claim of a new key with the command's events, so here nothing was written and the
// retry runs the command at once; a claim that was written (KurrentDB, or a key read first) is
// taken over after its lease (idempotency's TestTakeoverAfterLeaseOrRelease). Either way the
// command runs once.
func TestAbandonedClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	for _, tc := range crashCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &server{dir: t.TempDir(), args: []string{"--key-lease", "500ms", "--key-wait", "300ms"}}
			req := crash(t, s, crashAfterClaim, tc)
			s.restart(t)

			r, inFlight, err := s.sendSettled(t, req, time.Now().Add(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("taken over after %d answers of 409 in-flight", inFlight)
			wantStatus(t, r, tc.status)
			checkFirst(t, r) // the command ran now: the crashed request never answered
			tc.check(t, s, r)
			checkReplay(t, r, s.do(t, req.method, req.path, req.key, req.body))
		})
	}
}

// SIGTERM while creates are in flight: every command acknowledged with a 2xx is durable and
// replays after a restart; none took effect twice.
func TestGracefulShutdownKeepsAcknowledgedCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 50
	type result struct {
		req request
		res *response
		err error
	}
	results := make([]result, n)
	start := make(chan struct{})
	acked := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range n {
		results[i].req = request{method: "POST", path: "/v1/orders", key: fmt.Sprintf("shutdown-%02d", i), body: orderFor(fmt.Sprintf("c-%02d", i))}
		wg.Go(func() {
			<-start
			results[i].res, results[i].err = s.send(t, results[i].req)
			if results[i].err == nil && results[i].res.status/100 == 2 {
				once.Do(func() { close(acked) })
			}
		})
	}
	close(start)
	select {
	case <-acked:
	case <-time.After(requestTimeout):
		t.Error("no create was acknowledged before the shutdown")
	}
	s.signal(t, syscall.SIGTERM)
	wg.Wait()
	if st := s.wait(t, stopTimeout); !st.Success() {
		t.Errorf("after SIGTERM the server exited with %v; want status 0", st)
	}

	how := map[string]int{}
	for _, res := range results {
		switch {
		case res.err != nil:
			how["no answer: "+res.err.Error()]++
		default:
			how[fmt.Sprintf("%d %s", res.res.status, res.res.problem())]++
		}
	}
	t.Logf("outcomes of the creates sent around SIGTERM: %v", how)

	s.restart(t)
	for i, res := range results {
		again := s.do(t, res.req.method, res.req.path, res.req.key, res.req.body)
		switch {
		case res.err == nil && res.res.status/100 == 2:
			checkReplay(t, res.res, again)
		case res.err == nil && res.res.status < 500:
			t.Errorf("request %d during shutdown: %v; want 2xx, 5xx or no answer", i, res.res)
		case again.replayed() == "true":
			// It ran, yet its client heard nothing: the shutdown dropped an in-flight answer.
			t.Errorf("request %d (key %s) got %v during shutdown, but had run: the retry replayed %v", i, res.req.key, res.err, again)
		}
		id := createdID(t, again)
		if evs := s.events(t, id); count(evs, "order.created.v2", "", "") != 1 {
			t.Errorf("order %s (key %s) has events %v; want one order.created.v2", id, res.req.key, types(evs))
		}
	}
}

// A 2xx means the command is on disk: SIGKILL right after it loses nothing.
func TestAcknowledgedCommandSurvivesKill(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	first := s.do(t, "POST", "/v1/orders", "survive-create", orderFor("c-survive"))
	id := createdID(t, first)
	add := s.command(t, id, "/lines", "survive-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	s.kill(t)
	s.restart(t)

	checkReplay(t, first, s.do(t, "POST", "/v1/orders", "survive-create", orderFor("c-survive")))
	checkReplay(t, add, s.do(t, "POST", "/v1/orders/"+id+"/lines", "survive-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}))
	if o := s.order(t, id); o.num("version") != 3 || o.num("total") != orderTotal+500 {
		t.Errorf("after SIGKILL and restart: %v; want version 3, total %d", o, orderTotal+500)
	}
}

// A server that restarts remembers no key, and claims a key it has not seen along with the
// command's events: a key of the earlier run is recognised from the store all the same,
// whatever the request does with it, and nothing is written for it.
func TestKeysOfTheEarlierRunAfterRestart(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	shipment := map[string]any{"carrier": "DHL", "trackingNumber": "T-1"}
	first := s.do(t, "POST", "/v1/orders", "earlier-create", orderFor("c-earlier"))
	id := createdID(t, first)
	add := s.command(t, id, "/lines", "earlier-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	refused := s.do(t, "POST", "/v1/orders/"+id+"/shipments", "earlier-ship", shipment)
	if refused.status/100 != 4 {
		t.Fatalf("shipping an unpaid order: %v; want a refusal", refused)
	}
	s.restart(t)
	head := s.projections(t)["orders"].Head

	// The same requests get their first answers,
	checkReplay(t, first, s.do(t, "POST", "/v1/orders", "earlier-create", orderFor("c-earlier")))
	checkReplay(t, add, s.do(t, "POST", "/v1/orders/"+id+"/lines", "earlier-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}))
	checkReplay(t, refused, s.do(t, "POST", "/v1/orders/"+id+"/shipments", "earlier-ship", shipment))
	// other requests with the same keys are refused,
	for _, r := range []*response{
		s.do(t, "POST", "/v1/orders", "earlier-create", orderFor("c-earlier-other")),
		s.do(t, "POST", "/v1/orders/"+id+"/lines", "earlier-add", line{SKU: "sku-3", Quantity: 1, UnitPrice: 700}),
		s.do(t, "POST", "/v1/orders/"+id+"/lines", "earlier-ship", line{SKU: "sku-4", Quantity: 1, UnitPrice: 900}),
	} {
		checkProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
	}
	// and none of them wrote anything.
	if after := s.projections(t)["orders"].Head; after != head {
		t.Errorf("the log's head moved from %d to %d; want nothing written for keys of the earlier run", head, after)
	}
}

// answeredCases are commands that succeed with events, each after its setup; the request
// returned carries crashKey.
var answeredCases = []struct {
	name   string
	status int
	setup  func(t *testing.T, s *server) request
}{
	{"create", http.StatusCreated, func(*testing.T, *server) request {
		return request{method: "POST", path: "/v1/orders", key: crashKey, body: orderFor("c-answer")}
	}},
	{"add line", http.StatusOK, onOrder(nil, "POST", "/lines", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})},
	{"set quantity", http.StatusOK, onOrder(nil, "PUT", "/lines/sku-1", map[string]any{"quantity": 3})},
	{"remove line", http.StatusOK, onOrder(func(t *testing.T, s *server, id string) {
		s.command(t, id, "/lines", "setup-line", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	}, "DELETE", "/lines/sku-2", nil)},
	{"start payment", http.StatusOK, onOrder(nil, "POST", "/payments", map[string]any{"paymentId": "p-1", "amount": orderTotal})},
	{"confirm payment", http.StatusOK, onOrder(startPayment, "POST", "/payments/p-1/confirm", map[string]any{"amount": orderTotal})},
	{"fail payment", http.StatusOK, onOrder(startPayment, "POST", "/payments/p-1/fail", map[string]any{"reason": "declined"})},
	{"payment callback", http.StatusOK, func(t *testing.T, s *server) request {
		id, _ := s.create(t, "setup-create", "c-answer")
		s.command(t, id, "/payments", "setup-start", map[string]any{"paymentId": "p-callback", "amount": orderTotal})
		return request{method: "POST", path: "/v1/payments/p-callback/confirm", key: crashKey, body: map[string]any{"amount": orderTotal}}
	}},
	{"cancel", http.StatusOK, onOrder(nil, "POST", "/cancel", map[string]any{"reason": "changed my mind"})},
	{"ship", http.StatusOK, onOrder(paid, "POST", "/shipments", map[string]any{"carrier": "DHL", "trackingNumber": "T-1"})},
	{"refund", http.StatusOK, onOrder(paid, "POST", "/refunds", map[string]any{"refundId": "r-1", "amount": orderTotal})},
	{"complete refund", http.StatusOK, onOrder(func(t *testing.T, s *server, id string) {
		paid(t, s, id)
		s.command(t, id, "/refunds", "setup-refund", map[string]any{"refundId": "r-1", "amount": orderTotal})
	}, "POST", "/refunds/r-1/complete", map[string]any{})},
}

// onOrder returns a setup that creates an order, prepares it, and returns the request on it.
func onOrder(prepare func(t *testing.T, s *server, id string), method, sub string, body any) func(*testing.T, *server) request {
	return func(t *testing.T, s *server) request {
		id, _ := s.create(t, "setup-create", "c-answer")
		if prepare != nil {
			prepare(t, s, id)
		}
		return request{method: method, path: "/v1/orders/" + id + sub, key: crashKey, body: body}
	}
}

func startPayment(t *testing.T, s *server, id string) {
	s.command(t, id, "/payments", "setup-start", map[string]any{"paymentId": "p-1", "amount": orderTotal})
}

func paid(t *testing.T, s *server, id string) { s.pay(t, id, "p-1") }

// The server answers a command and is killed at once: the retry after a restart gets the very
// answer given, byte for byte, read from its key, whose claim and outcome the embedded store
// wrote in one event with the command's events.
func TestCrashAfterAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range answeredCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &server{dir: t.TempDir()}
			s.start(t)
			req := tc.setup(t, s)
			first, err := s.send(t, req)
			if err != nil {
				t.Fatalf("%v: %v; want an answer before the server dies", req, err)
			}
			wantStatus(t, first, tc.status)
			checkFirst(t, first)
			s.kill(t)
			s.restart(t)
			checkReplay(t, first, s.do(t, req.method, req.path, req.key, req.body))
			s.current().stop(t)
			if got := keyEventTypes(t, s.dir, "local", req.key); !slices.Equal(got, []string{idempotency.TypeRecorded}) {
				t.Errorf("the key's stream holds %v; want one %s", got, idempotency.TypeRecorded)
			}
		})
	}
}

// A keyed create on the embedded store leaves one event in its key's stream, the claim with the
// outcome, written with the order's: whether the server runs on, or is killed before the
// append (the retry runs the create) or right after it (the retry replays it), the retry
// answers the first answer or the only run's, the customer has one order, and the key one event.
func TestKeyedCreateIsOneKeyEvent(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{"", crashAfterClaim, crashAfterAppend} {
		t.Run(cmp.Or(hook, "no crash"), func(t *testing.T) {
			t.Parallel()
			s := &server{dir: t.TempDir()}
			tc := crashCases[0] // create
			var req request
			if hook == "" {
				s.start(t)
				req = tc.setup(t, s)
				wantStatus(t, s.do(t, req.method, req.path, req.key, req.body), tc.status)
			} else {
				req = crash(t, s, hook, tc)
				s.restart(t)
			}
			r := s.do(t, req.method, req.path, req.key, req.body)
			wantStatus(t, r, tc.status)
			tc.check(t, s, r)
			s.current().stop(t)
			if got := keyEventTypes(t, s.dir, "local", req.key); !slices.Equal(got, []string{idempotency.TypeRecorded}) {
				t.Errorf("the key's stream holds %v; want one %s", got, idempotency.TypeRecorded)
			}
		})
	}
}

// keyEventTypes reads the types of the events of principal's key from the store in dir, whose
// server has stopped.
func keyEventTypes(t *testing.T, dir, principal, key string) []string {
	t.Helper()
	var types []string
	for _, e := range keyEvents(t, dir, principal, key) {
		types = append(types, e.Type)
	}
	return types
}

// keyEvents reads the events of principal's key from the embedded store in dir, whose server
// is stopped.
func keyEvents(t *testing.T, dir, principal, key string) []eventstore.RecordedEvent {
	t.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var events []eventstore.RecordedEvent
	for e, err := range s.ReadStream(context.Background(), idempotency.StreamName(principal, key), eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

// A webhook endpoint's registration is a keyed write of the same pipeline as a create: killed
// after its key's claim (before its append) or right after its append, the retry after a
// restart answers with one endpoint and the secret it was registered with, every retry after it
// the same, and the key's stream holds one event.
func TestRegistrationThroughKills(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{crashAfterClaim, crashAfterAppend} {
		t.Run(hook, func(t *testing.T) {
			t.Parallel()
			s := &server{dir: t.TempDir(), args: webhookArgs(t), env: []string{hook + "=" + crashKey}}
			s.start(t)
			req := request{method: "POST", path: "/v1/webhook-endpoints", key: crashKey,
				body: map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}}}
			if r, err := s.send(t, req); err == nil {
				t.Fatalf("%v; want no answer: the server should have killed itself", r)
			}
			if st := s.wait(t, stopTimeout); !killedBy(st, syscall.SIGKILL) {
				t.Fatalf("the server ended with %v; want killed by SIGKILL", st)
			}
			s.env = nil
			s.restart(t)
			first := s.do(t, req.method, req.path, req.key, req.body)
			wantStatus(t, first, 201)
			again := s.do(t, req.method, req.path, req.key, req.body)
			if again.str("id") != first.str("id") || again.str("secret") != first.str("secret") || again.replayed() != "true" {
				t.Errorf("the retries: %s, then %s", first.body, again.body)
			}
			if n := len(s.do(t, "GET", "/v1/webhook-endpoints", "", nil).json["endpoints"].([]any)); n != 1 {
				t.Errorf("%d endpoints registered; want 1", n)
			}
			s.current().stop(t)
			if got := keyEventTypes(t, s.dir, "local", crashKey); !slices.Equal(got, []string{idempotency.TypeRecorded}) {
				t.Errorf("the key's stream holds %v; want one %s", got, idempotency.TypeRecorded)
			}
		})
	}
}
