package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/providers"
)

var (
	testStandardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("cli-test-standard-key-32-bytes!!"))
	testStripeSecret   = "whsec_cliTestStripeSecret0123456789"
)

// providersFile writes a providers file of a Standard Webhooks and a Stripe provider.
func providersFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.json")
	data := `{"providers":[
		{"name":"acme-pay","principal":"shop-1","scheme":"standard-webhooks","secrets":["` + testStandardSecret + `"]},
		{"name":"stripe","principal":"shop-1","scheme":"stripe","secrets":["` + testStripeSecret + `"]}]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// providerService is a service's provider events as far as deliveries go: it verifies and
// reads each with the providers of file, and keeps what it read.
type providerService struct {
	*httptest.Server
	mu     sync.Mutex
	events []providers.Event
	bodies [][]byte
}

func newProviderService(t *testing.T, file string, status int) *providerService {
	t.Helper()
	set, err := providers.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &providerService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := set.Get(strings.TrimPrefix(r.URL.Path, "/v1/provider-events/"))
		body, _ := io.ReadAll(r.Body)
		if !ok || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not a provider event", http.StatusNotFound)
			return
		}
		if err := p.Verify(r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		e, err := p.Read(r.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		s.mu.Lock()
		s.events, s.bodies = append(s.events, e), append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"event": e.ID, "kind": string(e.Kind)})
	}))
	t.Cleanup(s.Close)
	return s
}

// got returns what the service read so far, and the bodies.
func (s *providerService) got() ([]providers.Event, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]providers.Event(nil), s.events...), append([][]byte(nil), s.bodies...)
}

// provider send sends a delivery that the provider's Verify and Read accept; --times 2 sends
// it twice, with the same event id and body.
func TestProviderSendRedelivers(t *testing.T) {
	file := providersFile(t)
	for _, tc := range []struct {
		provider, typ, payment string
	}{
		{"acme-pay", "payment.succeeded", "pay-1"},
		{"stripe", "payment_intent.succeeded", "pi_1"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			srv := newProviderService(t, file, http.StatusAccepted)
			r := runCLI(t, "provider", "send", "--providers-file", file, "--provider", tc.provider, "--url", srv.URL,
				"--type", tc.typ, "--payment-id", tc.payment, "--order-id", "ord-1", "--amount", "1250", "--currency", "eur", "--times", "2")
			if r.err != nil {
				t.Fatalf("provider send: %v\n%s", r.err, r.stderr)
			}
			events, bodies := srv.got()
			if len(events) != 2 || events[0] != events[1] || !bytes.Equal(bodies[0], bodies[1]) {
				t.Fatalf("the service read %+v; want the same event twice", events)
			}
			want := providers.Event{ID: events[0].ID, Type: tc.typ, Kind: providers.PaymentSucceeded,
				PaymentID: tc.payment, OrderID: "ord-1", Amount: order.Money{Amount: 1250, Currency: "EUR"}}
			if events[0] != want || events[0].ID == "" {
				t.Errorf("the service read %+v; want %+v", events[0], want)
			}
			answer := `{"event":"` + want.ID + `","kind":"payment-succeeded"}`
			if wantOut := strings.Repeat("202 Accepted\n"+answer+"\n", 2); r.stdout != wantOut {
				t.Errorf("printed:\n%s\nwant:\n%s", r.stdout, wantOut)
			}
			for _, secret := range []string{testStandardSecret, testStripeSecret} {
				if strings.Contains(r.stdout+r.stderr, strings.TrimPrefix(secret, "whsec_")) {
					t.Errorf("printed a secret:\n%s%s", r.stdout, r.stderr)
				}
			}
		})
	}
}

// --event-id names the event; a Stripe refund is read as the service reads it.
func TestProviderSendEventID(t *testing.T) {
	file := providersFile(t)
	srv := newProviderService(t, file, http.StatusOK)
	r := runCLI(t, "provider", "send", "--providers-file", file, "--provider", "stripe", "--url", srv.URL+"/",
		"--type", "charge.refunded", "--payment-id", "pi_1", "--refund-id", "re_1", "--amount", "500", "--currency", "EUR", "--event-id", "evt_given")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := providers.Event{ID: "evt_given", Type: "charge.refunded", Kind: providers.RefundSucceeded,
		PaymentID: "pi_1", RefundID: "re_1", Amount: order.Money{Amount: 500, Currency: "EUR"}}
	if events, _ := srv.got(); len(events) != 1 || events[0] != want {
		t.Errorf("the service read %+v; want %+v", events, want)
	}
}

// --body sends the file as it is, signed; a refusal makes the command fail.
func TestProviderSendBodyAndRefusal(t *testing.T) {
	file := providersFile(t)
	body := filepath.Join(t.TempDir(), "body.json")
	const data = "{\"type\": \"payment.created\",\n \"data\": {}}\n"
	if err := os.WriteFile(body, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newProviderService(t, file, http.StatusConflict)
	env := map[string]string{"API_PAYMENT_PROVIDERS": file, "API_URL": srv.URL}
	r := runCLIWith(t, cliInput{env: env}, "provider", "send", "--provider", "acme-pay", "--body", body)
	if r.err == nil || !strings.Contains(r.err.Error(), "the service refused 1 of 1 deliveries") {
		t.Errorf("provider send: %v; want the refusal", r.err)
	}
	if events, bodies := srv.got(); len(bodies) != 1 || string(bodies[0]) != data || events[0].Kind != providers.Unmapped {
		t.Errorf("the service got %q (%+v); want the file as it is", bodies, events)
	}
	if !strings.HasPrefix(r.stdout, "409 Conflict\n") {
		t.Errorf("printed %q; want the status first", r.stdout)
	}
}

// Flags that make an event the service cannot read, an unknown provider and a service that
// does not answer are errors, told in the command line's terms.
func TestProviderSendErrors(t *testing.T) {
	file := providersFile(t)
	srv := newProviderService(t, file, http.StatusAccepted)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "stripe", "--url", srv.URL, "--type", "payment_intent.succeeded", "--payment-id", "pi_1"}, "give --payment-id, --refund-id, --amount and --currency"},
		{[]string{"--provider", "paypal", "--url", srv.URL, "--type", "x"}, `no provider "paypal" in ` + file + "; it has acme-pay, stripe"},
		{[]string{"--provider", "stripe", "--url", srv.URL, "--type", "x", "--times", "0"}, "--times 0: 1 to 100"},
		{[]string{"--provider", "stripe", "--url", srv.URL}, "give the event's --type, or a --body to send"},
		{[]string{"--provider", "stripe", "--url", closed.URL, "--type", "x"}, "no answer from the service at " + closed.URL + "/v1/provider-events/stripe (--url or API_URL)"},
	} {
		r := runCLI(t, append([]string{"provider", "send", "--providers-file", file}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("provider send %v: %v; want an error saying %q", tc.args, r.err, tc.want)
		}
	}
	if events, _ := srv.got(); len(events) != 0 {
		t.Errorf("the service got %+v; want nothing", events)
	}
	if _, err := parseCLI(t, nil, "provider", "send", "--provider", "stripe", "--type", "x"); err == nil {
		t.Error("provider send without a providers file was accepted")
	}
}
