package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is a webhook endpoint on loopback. It verifies every delivery's signature with the
// Standard Webhooks reference library (not the server's code), records what it received, and
// answers as answer decides.
type receiver struct {
	srv *http.Server
	url string

	mu       sync.Mutex
	secrets  []string
	answer   func(d delivery, attempt int) (status int, delay time.Duration)
	attempts map[string]int      // by webhook-id, every attempt
	done     map[string]delivery // by webhook-id, the first acknowledged
	effects  int                 // acknowledged deliveries of a new id: a receiver's side effects
	perOrder map[string][]uint64 // each order's revisions, in the order first acknowledged
	invalid  []string            // deliveries whose signature or body did not check out
	ids      map[string]string   // (order, revision) → webhook-id, to check ids are stable
	inflight map[string]bool     // webhook-ids being answered now
	overlaps []string            // webhook-ids received while an attempt of theirs was in flight
}

// delivery is a received body.
type delivery struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"createdAt"`
	OrderID   string    `json:"orderId"`
	Revision  uint64    `json:"revision"`
	Data      struct {
		Event map[string]any `json:"event"`
		Order struct {
			ID         string `json:"id"`
			CustomerID string `json:"customerId"`
			Status     string `json:"status"`
			Version    int64  `json:"version"`
		} `json:"order"`
	} `json:"data"`
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hook", attempts: map[string]int{}, done: map[string]delivery{},
		perOrder: map[string][]uint64{}, ids: map[string]string{}, inflight: map[string]bool{},
		answer: func(delivery, int) (int, time.Duration) { return 204, 0 }}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve)}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *receiver) setSecrets(s ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = s
}

func (r *receiver) setAnswer(f func(d delivery, attempt int) (int, time.Duration)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = f
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var d delivery
	err := json.Unmarshal(body, &d)
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	if err == nil {
		err = verify(secrets, body, req.Header)
	}
	r.mu.Lock()
	if err == nil && d.ID != req.Header.Get("webhook-id") {
		err = fmt.Errorf("body id %s, header %s", d.ID, req.Header.Get("webhook-id"))
	}
	key := fmt.Sprintf("%s@%d", d.OrderID, d.Revision)
	if err == nil && r.ids[key] != "" && r.ids[key] != d.ID {
		err = fmt.Errorf("%s delivered as %s and as %s", key, r.ids[key], d.ID)
	}
	if err != nil {
		r.invalid = append(r.invalid, fmt.Sprintf("%v: %s", err, body))
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.ids[key] = d.ID
	r.attempts[d.ID]++
	if r.inflight[d.ID] {
		r.overlaps = append(r.overlaps, d.ID)
	}
	r.inflight[d.ID] = true
	status, delay := r.answer(d, r.attempts[d.ID])
	r.mu.Unlock()
	time.Sleep(delay)
	r.mu.Lock()
	delete(r.inflight, d.ID)
	if _, ok := r.done[d.ID]; !ok && status/100 == 2 {
		r.done[d.ID] = d
		r.effects++
		r.perOrder[d.OrderID] = append(r.perOrder[d.OrderID], d.Revision)
	}
	r.mu.Unlock()
	w.WriteHeader(status)
}

// verify checks the signature against the receiver's secrets: one that verifies suffices.
func verify(secrets []string, body []byte, h http.Header) error {
	var errs []error
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return err
		}
		if err := wh.Verify(body, h); err == nil {
			return nil
		} else {
			errs = append(errs, err)
		}
	}
	return fmt.Errorf("no secret verifies the signature: %v", errs)
}

// received returns how many distinct events were acknowledged.
func (r *receiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done)
}

// webhookArgs are the flags of a server that delivers to loopback receivers quickly: a key file
// outside the data directory, retries compressed to milliseconds.
func webhookArgs(t *testing.T, more ...string) []string {
	return append(webhookPacing(t, "0s,50ms,100ms,150ms", "500ms", "2s"), more...)
}

// webhookPacing are the flags of a server delivering to loopback receivers with the retry
// schedule, attempt timeout and lease given.
func webhookPacing(t *testing.T, schedule, timeout, lease string) []string {
	return []string{
		"--webhooks-secret-key-file", filepath.Join(t.TempDir(), "webhooks.key"), "--webhooks-generate-key",
		"--webhooks-allow-private", "--webhooks-retry-schedule", schedule,
		"--webhooks-timeout", timeout, "--webhooks-lease", lease,
	}
}

// register registers url for caller's orders and returns the endpoint's id and secret.
func (s *server) register(t *testing.T, caller []string, key, url string, events ...string) (string, string) {
	t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	r := s.ok(t, caller, 201, "POST", "/v1/webhook-endpoints", key, map[string]any{"url": url, "events": events})
	return r.str("id"), r.str("secret")
}

// lifecycle takes a new order of caller through creation, payment and shipment, and returns
// its id and how many events it has.
func (s *server) lifecycle(t *testing.T, caller []string, key, customer string) (string, int) {
	t.Helper()
	id := createdID(t, s.as(t, caller, "POST", "/v1/orders", key, orderFor(customer)))
	s.ok(t, caller, 200, "POST", "/v1/orders/"+id+"/payments", key+"-start", map[string]any{"paymentId": "p-" + key, "amount": orderTotal})
	s.ok(t, caller, 200, "POST", "/v1/orders/"+id+"/payments/p-"+key+"/confirm", key+"-confirm", map[string]any{"amount": orderTotal})
	s.ok(t, caller, 200, "POST", "/v1/orders/"+id+"/shipments", key+"-ship", map[string]any{"carrier": "dhl", "trackingNumber": "t-" + key})
	return id, 5 // created, line added, payment started, paid, shipped
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A receiver that fails the first attempts, times out, answers 500 and 410 gets every event
// after its registration, an order's events in their order, each signed; the deliveries that
// met 410 or ran out of retries are dead letters, and one sent again by hand arrives with its id.
func TestWebhooksDeliverEveryEventSignedAndInOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t))...)
	before, _ := s.lifecycle(t, alice, "before", "c-before")

	ra, rb := newReceiver(t), newReceiver(t)
	idA, secretA := s.register(t, alice, "hook-a", ra.url)
	ra.setSecrets(secretA)
	_, secretB := s.register(t, bob, "hook-b", rb.url)
	rb.setSecrets(secretB)
	ra.setAnswer(func(d delivery, attempt int) (int, time.Duration) {
		switch {
		case d.Data.Order.CustomerID == "c-gone":
			return 410, 0
		case d.Data.Order.CustomerID == "c-dead":
			return 500, 0 // every attempt: dead-lettered after the last
		case attempt == 1 && d.Revision%2 == 0:
			return 200, 700 * time.Millisecond // answered after the timeout: a failure
		case attempt <= 2:
			return 500, 0
		}
		return 200, 0
	})

	const orders = 6
	events := 0
	var alices []string
	for i := range orders {
		id, n := s.lifecycle(t, alice, fmt.Sprintf("a-%d", i), fmt.Sprintf("c-%d", i))
		alices, events = append(alices, id), events+n
	}
	gone, goneEvents := s.lifecycle(t, alice, "gone", "c-gone")
	dead, deadEvents := s.lifecycle(t, alice, "dead", "c-dead")
	bobs, _ := s.lifecycle(t, bob, "b-0", "c-bob")

	waitFor(t, 30*time.Second, "alice's events delivered", func() bool { return ra.received() == events })
	waitFor(t, 30*time.Second, "bob's events delivered", func() bool { return rb.received() == 5 })
	failed := func() []any {
		r := s.ok(t, alice, 200, "GET", "/v1/webhook-endpoints/"+idA+"/deliveries?status=failed", "", nil)
		list, _ := r.json["deliveries"].([]any)
		return list
	}
	waitFor(t, 30*time.Second, "dead letters", func() bool { return len(failed()) == goneEvents+deadEvents })

	ra.mu.Lock()
	for _, bad := range ra.invalid {
		t.Errorf("alice's receiver: %s", bad)
	}
	for _, id := range alices {
		if got := ra.perOrder[id]; !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) {
			t.Errorf("order %s: revisions acknowledged in the order %v, want 0 to 4", id, got)
		}
	}
	for _, id := range []string{before, bobs, gone, dead} {
		if got := ra.perOrder[id]; len(got) > 0 {
			t.Errorf("order %s reached alice's endpoint: %v", id, got)
		}
	}
	ra.mu.Unlock()
	rb.mu.Lock()
	if got := rb.perOrder[bobs]; !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) || len(rb.perOrder) != 1 || len(rb.invalid) > 0 {
		t.Errorf("bob's receiver: %v, invalid %v", rb.perOrder, rb.invalid)
	}
	rb.mu.Unlock()

	// Every dead letter lists its attempts; the dead order's ran out of retries (4 attempts).
	var deadID string
	for _, x := range failed() {
		d := x.(map[string]any)
		tries := jsonInt(d["tries"])
		attempts := d["attempts"].([]any)
		switch d["orderId"] {
		case gone:
			if tries != 1 || jsonInt(attempts[0].(map[string]any)["status"]) != 410 {
				t.Errorf("gone order's dead letter: %v", d)
			}
		case dead:
			if tries != 4 || len(attempts) != 4 {
				t.Errorf("dead order's dead letter: %v", d)
			}
			deadID = d["id"].(string)
		default:
			t.Errorf("unexpected dead letter %v", d)
		}
	}

	// Sent again by hand, once the receiver takes it: the same webhook-id.
	ra.setAnswer(func(delivery, int) (int, time.Duration) { return 200, 0 })
	// Through the command line, as an operator: list, dead letters, retry.
	cli := func(args ...string) string {
		out, err := runBinary(append([]string{"webhooks"}, append(args, "--url", s.url(""), "--api-key", "adam-access-secret")...)...)
		if err != nil {
			t.Fatalf("api webhooks %v: %v", args, err)
		}
		return out
	}
	if out := cli("list"); !strings.Contains(out, idA) || !strings.Contains(out, "alice") {
		t.Errorf("api webhooks list:\n%s", out)
	}
	if out := cli("deliveries", idA); !strings.Contains(out, deadID) || !strings.Contains(out, "answered 500") {
		t.Errorf("api webhooks deliveries:\n%s", out)
	}
	cli("retry", idA, deadID)
	waitFor(t, 30*time.Second, "the retried dead letter", func() bool {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		_, ok := ra.done[deadID]
		return ok
	})
	waitFor(t, 30*time.Second, "the dead letter leaves the list", func() bool { return len(failed()) == goneEvents+deadEvents-1 })

	// Rebuilding the read models and restarting send nothing again.
	attempts := func() (n int) {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		for _, a := range ra.attempts {
			n += a
		}
		return n
	}
	before = fmt.Sprint(attempts())
	s.ok(t, adam, 202, "POST", "/admin/projections/orders/rebuild", "", nil)
	s.restart(t)
	s.ok(t, adam, 202, "POST", "/admin/projections/lookups/rebuild", "", nil)
	time.Sleep(2 * time.Second)
	if after := fmt.Sprint(attempts()); after != before {
		t.Errorf("%s attempts before the rebuild and restart, %s after", before, after)
	}
}
