package tests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/providers"
)

// The payment providers of these tests, both alice's: one signs as Standard Webhooks do, one
// as Stripe does.
var (
	psp = providers.Provider{Name: "psp", Principal: "alice", Scheme: providers.StandardWebhooks,
		Secrets: []providers.Secret{providers.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("psp-secret-of-32-bytes-for-tests")))}}
	stripe = providers.Provider{Name: "stripe", Principal: "alice", Scheme: providers.Stripe,
		Secrets: []providers.Secret{"whsec_stripe-secret-for-tests-0001"}}
)

// providersFile writes a providers file of ps.
func providersFile(t *testing.T, ps ...providers.Provider) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.json")
	writeProviders(t, path, ps...)
	return path
}

func writeProviders(t *testing.T, path string, ps ...providers.Provider) {
	t.Helper()
	type entry struct {
		Name      string   `json:"name"`
		Principal string   `json:"principal"`
		Scheme    string   `json:"scheme"`
		Secrets   []string `json:"secrets"`
	}
	var file struct {
		Providers []entry `json:"providers"`
	}
	for _, p := range ps {
		e := entry{Name: p.Name, Principal: p.Principal, Scheme: string(p.Scheme)}
		for _, s := range p.Secrets {
			e.Secrets = append(e.Secrets, string(s))
		}
		file.Providers = append(file.Providers, e)
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startWithProviders starts a server with the access tests' keys and the providers psp and
// stripe.
func startWithProviders(t *testing.T) *server {
	t.Helper()
	return startServer(t, "", "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp, stripe))
}

// signedDelivery is ev as p sends it at at: its body and signed headers.
func signedDelivery(t testing.TB, p providers.Provider, ev providers.Event, at time.Time) (body []byte, header []string) {
	t.Helper()
	body, err := p.Body(ev, at)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Sign(ev.ID, at, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		for _, v := range vs {
			header = append(header, k, v)
		}
	}
	return body, header
}

// deliver sends ev as p does, signed now.
func (s *server) deliver(t testing.TB, p providers.Provider, ev providers.Event) *response {
	t.Helper()
	body, header := signedDelivery(t, p, ev, time.Now())
	return s.do(t, "POST", "/v1/provider-events/"+p.Name, "", body, header...)
}

// deliverOK sends ev as p does and expects 200 with outcome.
func (s *server) deliverOK(t testing.TB, p providers.Provider, ev providers.Event, outcome string) *response {
	t.Helper()
	r := s.deliver(t, p, ev)
	wantStatus(t, r, http.StatusOK)
	if r.str("outcome") != outcome || r.str("eventId") != ev.ID {
		t.Errorf("%v: want outcome %s for event %s", r, outcome, ev.ID)
	}
	return r
}

func eur(amount int64) order.Money { return order.Money{Amount: amount, Currency: "EUR"} }

func succeeded(id, payment string, amount int64) providers.Event {
	return providers.Event{ID: id, Kind: providers.PaymentSucceeded, PaymentID: payment, Amount: eur(amount)}
}

func failed(id, payment string) providers.Event {
	return providers.Event{ID: id, Kind: providers.PaymentFailed, PaymentID: payment, Reason: "card declined"}
}

func refunded(id, payment, refund string, amount int64) providers.Event {
	return providers.Event{ID: id, Kind: providers.RefundSucceeded, PaymentID: payment, RefundID: refund, Amount: eur(amount)}
}

// payingOrder is a new order of alice's with payment id started.
func (s *server) payingOrder(t testing.TB, payment string) string {
	t.Helper()
	id := createdID(t, s.as(t, alice, "POST", "/v1/orders", "create-"+payment, orderFor("c-"+payment)))
	s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+id+"/payments", "start-"+payment, map[string]any{"paymentId": payment, "amount": orderTotal})
	return id
}

// eventTypes are the types of the order's events, in order.
func (s *server) eventTypes(t testing.TB, id string) []string {
	t.Helper()
	r := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id+"/events", "", nil)
	var page struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range page.Events {
		types = append(types, strings.TrimPrefix(e.Type, "order."))
	}
	return types
}

func countType(types []string, typ string) int {
	n := 0
	for _, t := range types {
		if strings.HasPrefix(t, typ) {
			n++
		}
	}
	return n
}

// unapplied is GET /v1/provider-events as the auditor.
func (s *server) unapplied(t testing.TB) []map[string]any {
	t.Helper()
	r := s.ok(t, audrey, http.StatusOK, "GET", "/v1/provider-events", "", nil)
	var page struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// Deliveries that are not the provider's are refused before their body is read, and leave
// nothing behind: an unknown provider, no signature, a wrong one, one signed 6 minutes ago,
// a secret of another provider, a body changed after signing.
func TestProviderDeliveriesAreVerified(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	id := s.payingOrder(t, "pay-verify")
	ev := succeeded("evt-verify", "pay-verify", orderTotal)
	body, header := signedDelivery(t, psp, ev, time.Now())
	stale, staleHeader := signedDelivery(t, psp, ev, time.Now().Add(-6*time.Minute))
	other := psp
	other.Secrets = []providers.Secret{providers.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("another-secret-of-32-bytes-tests")))}
	forged, forgedHeader := signedDelivery(t, other, ev, time.Now())
	tampered := []byte(strings.Replace(string(body), fmt.Sprint(orderTotal), "1", 1))
	for name, c := range map[string]struct {
		path   string
		body   []byte
		header []string
	}{
		"unknown provider": {"/v1/provider-events/nobody", body, header},
		"no signature":     {"/v1/provider-events/psp", body, nil},
		"stale":            {"/v1/provider-events/psp", stale, staleHeader},
		"another secret":   {"/v1/provider-events/psp", forged, forgedHeader},
		"tampered":         {"/v1/provider-events/psp", tampered, header},
		"stripe's scheme":  {"/v1/provider-events/stripe", body, header},
	} {
		r := s.do(t, "POST", c.path, "", c.body, c.header...)
		checkProblem(t, r, http.StatusUnauthorized, "delivery-unverified")
		if strings.Contains(string(r.body), "whsec_") {
			t.Errorf("%s: the answer shows a secret: %s", name, r.body)
		}
	}
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paying" {
		t.Errorf("after refused deliveries: %v; want the order still paying", o)
	}
	if got := s.unapplied(t); len(got) != 0 {
		t.Errorf("refused deliveries were recorded: %v", got)
	}
	s.deliverOK(t, psp, ev, "applied")
	s.deliverOK(t, psp, ev, "applied")
	m := s.metrics(t, adam...)
	for series, want := range map[string]float64{
		`orders_provider_events_total{outcome="unverified",provider=""}`:    1,
		`orders_provider_events_total{outcome="unverified",provider="psp"}`: 4,
		`orders_provider_events_total{outcome="applied",provider="psp"}`:    1,
		`orders_provider_events_total{outcome="replayed",provider="psp"}`:   1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
}

// Each event type the service acts on, of each scheme, takes its order where it says, once:
// a redelivery replays the first answer, and the same payment reported by a second event is
// paid once.
func TestProviderEventsApplyOnce(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	for _, p := range []providers.Provider{psp, stripe} {
		t.Run(p.Name, func(t *testing.T) {
			pay := "pay-types-" + p.Name
			id := s.payingOrder(t, pay)
			first := s.deliverOK(t, p, succeeded(p.Name+"-evt-1", pay, orderTotal), "applied")
			checkReplay(t, first, s.deliver(t, p, succeeded(p.Name+"-evt-1", pay, orderTotal)))
			s.deliverOK(t, p, succeeded(p.Name+"-evt-2", pay, orderTotal), "applied") // the same payment, another event
			s.deliverOK(t, p, refunded(p.Name+"-evt-3", pay, "re-"+p.Name, 500), "applied")
			if p.Scheme == providers.Stripe {
				// Stripe reports one refund twice: refund.updated, then charge.refunded.
				charge := refunded(p.Name+"-evt-4", pay, "re-"+p.Name, 500)
				charge.Type = "charge.refunded"
				s.deliverOK(t, p, charge, "applied")
			}
			o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil)
			if o.str("status") != "refunded" || o.num("paid") != orderTotal || o.num("refunded") != 500 {
				t.Errorf("%v; want refunded, %d paid, 500 refunded", o, orderTotal)
			}
			types := s.eventTypes(t, id)
			if countType(types, "payment-confirmed") != 1 || countType(types, "refund-completed") != 1 || countType(types, "duplicate-charge") != 0 {
				t.Errorf("events %v; want one payment, one refund, no duplicate charge", types)
			}

			failedPay := "pay-failed-" + p.Name
			id = s.payingOrder(t, failedPay)
			s.deliverOK(t, p, failed(p.Name+"-evt-5", failedPay), "applied")
			if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "created" {
				t.Errorf("after the failure: %v; want created", o)
			}
		})
	}
}

// 200 deliveries of one event at once: one effect, one answer.
func TestProviderDeliveriesAtOnceApplyOnce(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	id := s.payingOrder(t, "pay-storm")
	ev := succeeded("evt-storm", "pay-storm", orderTotal)
	body, header := signedDelivery(t, psp, ev, time.Now())
	answers := make([]*response, 200)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = s.do(t, "POST", "/v1/provider-events/psp", "", body, header...)
		})
	}
	wg.Wait()
	var first *response
	for _, r := range answers {
		switch r.status {
		case http.StatusOK:
			if first == nil {
				first = r
			} else if string(r.body) != string(first.body) {
				t.Errorf("two answers: %s and %s", first.body, r.body)
			}
		case http.StatusConflict:
			checkProblem(t, r, http.StatusConflict, "idempotency-key-in-flight")
		default:
			t.Errorf("%v; want 200, or 409 while in flight", r)
		}
	}
	if first == nil || first.str("outcome") != "applied" {
		t.Fatalf("no delivery applied: %v", first)
	}
	if types := s.eventTypes(t, id); countType(types, "payment-confirmed") != 1 {
		t.Errorf("events %v; want one payment", types)
	}
}

// What the order cannot take is answered 2xx, so that the provider stops, and recorded where
// an auditor sees it: on the order's history, or, when no order is known or the type is one
// the service does not act on, in the provider log.
func TestProviderEventsNotAppliedAreRecorded(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	id := s.payingOrder(t, "pay-wrong")
	r := s.deliverOK(t, psp, succeeded("evt-wrong-amount", "pay-wrong", orderTotal-1), "unapplied")
	if r.str("orderId") != id || r.str("reason") == "" {
		t.Errorf("%v; want the order and a reason", r)
	}
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paying" || o.num("paid") != 0 {
		t.Errorf("after a wrong amount: %v; want the order still paying, nothing paid", o)
	}
	if types := s.eventTypes(t, id); countType(types, "duplicate-charge-recorded") != 1 {
		t.Errorf("events %v; want the wrong amount recorded as a charge to refund", types)
	}

	paid := s.payingOrder(t, "pay-late-failure")
	s.deliverOK(t, psp, succeeded("evt-paid", "pay-late-failure", orderTotal), "applied")
	second := succeeded("evt-second-charge", "pay-second", orderTotal)
	second.OrderID = paid // a charge the order never started, found by the provider's metadata
	s.deliverOK(t, psp, second, "unapplied")
	s.deliverOK(t, psp, failed("evt-late-failure", "pay-late-failure"), "unapplied")
	if types := s.eventTypes(t, paid); countType(types, "provider-event-unapplied") != 1 || countType(types, "duplicate-charge-recorded") != 1 {
		t.Errorf("events %v; want the late failure recorded, and the second charge as one to refund", types)
	}

	s.deliverOK(t, psp, succeeded("evt-unknown-payment", "pay-nobody", orderTotal), "unapplied")
	unknownType := providers.Event{ID: "evt-unknown-type", Type: "customer.created"}
	s.deliverOK(t, psp, unknownType, "unapplied")
	if r := s.deliverOK(t, psp, unknownType, "unapplied"); r.replayed() != "true" { // a redelivery records nothing more
		t.Errorf("the unknown type's redelivery: %v; want its first answer replayed", r)
	}
	// The payment is started after its success was logged: the event's redelivery is answered
	// by its key, as logged, and does not pay the order.
	late := s.payingOrder(t, "pay-nobody")
	if r := s.deliverOK(t, psp, succeeded("evt-unknown-payment", "pay-nobody", orderTotal), "unapplied"); r.replayed() != "true" {
		t.Errorf("the logged event's redelivery: %v; want its first answer replayed", r)
	}
	if st := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+late, "", nil).str("status"); st == "paid" {
		t.Errorf("the order of a logged event's redelivery is %s", st)
	}

	listed := map[string]string{}
	for _, u := range s.unapplied(t) {
		listed[fmt.Sprint(u["eventId"])] = fmt.Sprint(u["orderId"])
	}
	want := map[string]string{"evt-late-failure": paid, "evt-unknown-payment": "<nil>", "evt-unknown-type": "<nil>"}
	for ev, order := range want {
		if got, ok := listed[ev]; !ok || got != order {
			t.Errorf("provider events not applied: %v; want %s (order %s)", listed, ev, order)
		}
	}
	if len(listed) != len(want) {
		t.Errorf("provider events not applied: %v; want %v", listed, want)
	}
	// A page names the next exactly when more follow.
	page := func(query string) (events int, next string) {
		r := s.ok(t, audrey, http.StatusOK, "GET", "/v1/provider-events?"+query, "", nil)
		var p struct {
			Events []any  `json:"events"`
			Next   string `json:"next"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		return len(p.Events), p.Next
	}
	if n, next := page("limit=3"); n != 3 || next != "" {
		t.Errorf("a page of 3 of 3 events: %d events, next %q; want 3 and no next", n, next)
	}
	n, next := page("limit=2")
	if n != 2 || next == "" {
		t.Fatalf("a page of 2 of 3 events: %d events, next %q; want 2 and a next", n, next)
	}
	if n, next := page("limit=2&cursor=" + next); n != 1 || next != "" {
		t.Errorf("the page after: %d events, next %q; want 1 and no next", n, next)
	}
	s.ok(t, alice, http.StatusForbidden, "GET", "/v1/provider-events", "", nil) // auditors' only
}

// Events delivered out of order end as if they had arrived in order: a refund before the
// payment's success is refused for now (the provider delivers it again), and a failure and
// a success of one payment leave it paid, whichever comes first.
func TestProviderEventsOutOfOrder(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	id := s.payingOrder(t, "pay-early-refund")
	early := s.deliver(t, psp, refunded("evt-early-refund", "pay-early-refund", "re-early", orderTotal))
	checkProblem(t, early, http.StatusConflict, "too-early")
	if early.header.Get("Retry-After") == "" {
		t.Errorf("%v: no Retry-After", early)
	}
	s.deliverOK(t, psp, succeeded("evt-late-success", "pay-early-refund", orderTotal), "applied")
	s.deliverOK(t, psp, refunded("evt-early-refund", "pay-early-refund", "re-early", orderTotal), "applied")
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "refunded" {
		t.Errorf("refund before success, delivered again: %v; want refunded", o)
	}

	for _, successFirst := range []bool{true, false} {
		pay := fmt.Sprint("pay-order-", successFirst)
		id := s.payingOrder(t, pay)
		success, failure := succeeded("evt-s-"+pay, pay, orderTotal), failed("evt-f-"+pay, pay)
		if successFirst {
			s.deliverOK(t, psp, success, "applied")
			s.deliverOK(t, psp, failure, "unapplied")
		} else {
			s.deliverOK(t, psp, failure, "applied")
			s.deliverOK(t, psp, success, "applied")
		}
		o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil)
		if o.str("status") != "paid" || o.num("paid") != orderTotal {
			t.Errorf("success first %v: %v; want paid", successFirst, o)
		}
	}
}

// A provider's secret is rotated without a restart: with both secrets in the file either
// verifies; once the old one is gone from the file and the service reads it again (SIGHUP),
// only the new one does. A malformed file on reload keeps the providers in use.
func TestProviderSecretRotation(t *testing.T) {
	t.Parallel()
	rotated := psp
	rotated.Secrets = []providers.Secret{providers.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("the-new-secret-of-psp-32-bytes!!")))}
	both := psp
	both.Secrets = []providers.Secret{psp.Secrets[0], rotated.Secrets[0]}
	file := providersFile(t, both)
	s := startServer(t, "", "--keys-file", accessKeysFile(t), "--payment-providers", file)
	s.payingOrder(t, "pay-rotate")
	s.deliverOK(t, psp, failed("evt-rotate-old", "pay-rotate"), "applied")
	s.deliverOK(t, rotated, failed("evt-rotate-new", "pay-rotate"), "unapplied")

	writeProviders(t, file, rotated)
	s.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.deliver(t, psp, failed("evt-rotate-gone", "pay-rotate"))
		if r.status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old secret still verifies after the reload: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(file, []byte(`{"providers": [{"name": "psp"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.signal(t, syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	s.deliverOK(t, rotated, failed("evt-rotate-kept", "pay-rotate"), "unapplied")
}

// A service that cannot read its providers file at start says why and does not start.
func TestProvidersFileMalformedAtStart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(file, []byte(`{"providers": [{"name": "psp", "principal": "alice", "scheme": "paypal", "secrets": ["whsec_hunter2hunter2hunter2"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runAPI(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--payment-providers", file)
	if code == 0 || !strings.Contains(out, `scheme "paypal"`) || strings.Contains(out, "hunter2") || strings.Contains(out, "listening") {
		t.Errorf("serve with a malformed providers file: exit %d\n%s\nwant an error naming the scheme, without the secret, before listening", code, out)
	}
}

// A provider keeps delivering, as providers do, while the service is SIGKILLed and started
// again: every event is delivered three times at once, and again after every answer that is
// not 2xx or that never came. In the end each order took each event once, every redelivery
// gets the event's first 2xx answer, and the audit verifies.
func TestProviderDeliveriesThroughKills(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp),
		"--key-lease", "1s", "--key-wait", "500ms")
	const orders = 40
	var events []providers.Event
	ids := map[string]string{} // payment id → order
	for i := range orders {
		pay := fmt.Sprintf("pay-kill-%02d", i)
		ids[pay] = s.payingOrder(t, pay)
		events = append(events, succeeded("evt-kill-s-"+pay, pay, orderTotal), refunded("evt-kill-r-"+pay, pay, "re-"+pay, 500))
	}
	var mu sync.Mutex
	first := map[string]string{} // event id → the body of its first 2xx answer
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Minute)
	for _, ev := range events {
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					body, header := signedDelivery(t, psp, ev, time.Now())
					r, err := s.send(t, request{method: "POST", path: "/v1/provider-events/psp", body: body, header: header})
					if err == nil && r.status == http.StatusOK {
						mu.Lock()
						if b, ok := first[ev.ID]; ok && b != string(r.body) {
							t.Errorf("event %s answered %s, then %s", ev.ID, b, r.body)
						}
						first[ev.ID] = string(r.body)
						mu.Unlock()
						return
					}
					if err == nil && r.status != http.StatusConflict && r.status != http.StatusServiceUnavailable {
						t.Errorf("%v; want 200, or an answer a retry may change", r)
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Errorf("event %s: no 2xx in 2 minutes", ev.ID)
			})
		}
	}
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(first)
	}
	for i := range 3 { // killed once a quarter, a half and three quarters are answered
		for wait := time.Now().Add(20 * time.Second); answered() < (i+1)*len(events)/4 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("kill %d: %d of %d events answered 2xx", i+1, answered(), len(events))
		s.kill(t)
		s.restart(t)
	}
	wg.Wait()
	for _, ev := range events {
		r := s.deliver(t, psp, ev)
		if string(r.body) != first[ev.ID] {
			t.Errorf("event %s delivered again: %s; want its first answer %s", ev.ID, r.body, first[ev.ID])
		}
	}
	for pay, id := range ids {
		o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil)
		types := s.eventTypes(t, id)
		if o.str("status") != "refunded" || countType(types, "payment-confirmed") != 1 || countType(types, "refund-completed") != 1 ||
			countType(types, "duplicate-charge") != 0 {
			t.Errorf("order of %s: %v, events %v; want refunded, each event once", pay, o, types)
		}
	}
	s.current().stop(t)
	if out, code := runAPI(t, "audit", "verify", "--data", s.dir); code != 0 {
		t.Errorf("api audit verify: exit %d\n%s", code, tail(out, 8<<10))
	}
}

// A provider's deliveries of one event reach several nodes on one shared store at once (the
// store the provider's retries and a load balancer spread them over): one effect, one answer.
func TestProviderDeliveriesOnSeveralNodes(t *testing.T) {
	t.Parallel()
	onSharedStores(t, func(t *testing.T, args func(more ...string) []string) {
		nodes := startNodes(t, args("--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp, stripe)))
		id := nodes[0].payingOrder(t, "pay-nodes")
		deadline := time.Now().Add(requestTimeout)
		answers := make([]*response, 60)
		var wg sync.WaitGroup
		for i := range answers {
			p, ev := psp, succeeded("evt-nodes-psp", "pay-nodes", orderTotal)
			if i%2 == 1 {
				p, ev = stripe, succeeded("evt-nodes-stripe", "pay-nodes", orderTotal) // the same payment, another event
			}
			body, header := signedDelivery(t, p, ev, time.Now())
			node := nodes[i%len(nodes)]
			wg.Go(func() {
				r, _, err := node.sendSettled(t, request{method: "POST", path: "/v1/provider-events/" + p.Name, body: body, header: header}, deadline)
				if err != nil {
					t.Error(err)
				}
				answers[i] = r
			})
		}
		wg.Wait()
		byEvent := map[string]string{}
		for _, r := range answers {
			if r == nil || r.status != http.StatusOK || r.str("outcome") != "applied" {
				t.Fatalf("%v; want 200 applied", r)
			}
			if b, ok := byEvent[r.str("eventId")]; ok && b != string(r.body) {
				t.Errorf("two answers to one event: %s and %s", b, r.body)
			}
			byEvent[r.str("eventId")] = string(r.body)
		}
		for i, node := range nodes {
			if types := node.eventTypes(t, id); countType(types, "payment-confirmed") != 1 || countType(types, "duplicate-charge") != 0 {
				t.Errorf("node %d: events %v; want one payment", i, types)
			}
		}
	})
}
