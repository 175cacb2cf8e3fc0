package api

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/providers"
)

// testProvider is the payment provider of these tests, the development mode's principal's.
var testProvider = providers.Provider{Name: "psp", Principal: "local", Scheme: providers.StandardWebhooks,
	Secrets: []providers.Secret{providers.Secret("whsec_" + base64.StdEncoding.EncodeToString([]byte("psp-secret-of-32-bytes-for-tests")))}}

// withProvider serves testProvider's deliveries on srv.
func withProvider(t *testing.T, srv *Server) {
	t.Helper()
	p := testProvider
	set, err := providers.Parse(fmt.Appendf(nil, `{"providers":[{"name":%q,"principal":%q,"scheme":%q,"secrets":[%q]}]}`,
		p.Name, p.Principal, p.Scheme, string(p.Secrets[0])))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetProviders(set)
}

// deliver is a POST of body, of size bytes, to provider's endpoint with header, served by h.
func deliver(h http.Handler, provider string, header http.Header, body io.Reader, size int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/provider-events/"+provider, body)
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// signedHeaders are testProvider's headers for a delivery of another body than the one sent:
// well formed and in time, so that only the body's signature refuses the delivery.
func signedHeaders(t *testing.T, at time.Time) http.Header {
	t.Helper()
	h, err := testProvider.Sign("msg_1", at, []byte(`{"type":"payment.succeeded"}`))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// untouchedBody is a body that records whether anything read it.
type untouchedBody struct{ read atomic.Bool }

func (b *untouchedBody) Read([]byte) (int, error) {
	b.read.Store(true)
	return 0, io.EOF
}

// A delivery that no provider could have sent, as its headers alone tell, is refused before a
// byte of its body is read: an unknown provider, no signature headers, a malformed one, a
// timestamp out of bounds. One whose headers could be the provider's is read, and refused by
// its signature.
func TestProviderHeadersAreCheckedBeforeTheBody(t *testing.T) {
	srv, _ := newServer(t, nil)
	withProvider(t, srv)
	h := srv.Handler()
	good := signedHeaders(t, time.Now())
	edited := func(name, value string) http.Header {
		e := good.Clone()
		e.Set(name, value)
		return e
	}
	for name, c := range map[string]struct {
		provider string
		header   http.Header
	}{
		"unknown provider":          {"nobody", good},
		"no headers":                {"psp", nil},
		"no webhook-id":             {"psp", edited("webhook-id", "")},
		"malformed signature":       {"psp", edited("webhook-signature", "v2,abc")},
		"timestamp not a number":    {"psp", edited("webhook-timestamp", "soon")},
		"timestamp 6 minutes old":   {"psp", signedHeaders(t, time.Now().Add(-6*time.Minute))},
		"timestamp 6 minutes ahead": {"psp", signedHeaders(t, time.Now().Add(6*time.Minute))},
	} {
		body := &untouchedBody{}
		rec := deliver(h, c.provider, c.header, body, 1<<20)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "/problems/delivery-unverified") {
			t.Errorf("%s: %d %s; want 401 delivery-unverified", name, rec.Code, rec.Body)
		}
		if body.read.Load() {
			t.Errorf("%s: the body was read", name)
		}
	}
	body := &untouchedBody{}
	if rec := deliver(h, "psp", good, body, 1<<20); rec.Code != http.StatusUnauthorized || !body.read.Load() {
		t.Errorf("headers in form, the body signed otherwise: %d %s, body read %v; want 401 once the body is read", rec.Code, rec.Body, body.read.Load())
	}
}

// The bodies of deliveries, read before they are verified, have a budget of their own: a slow
// one that holds all of it makes the next large delivery wait and answer 503, and leaves the
// room of the commands' bodies alone.
func TestProviderBodiesHaveABudgetOfTheirOwn(t *testing.T) {
	srv, _ := newServer(t, nil)
	srv.BodyMemory, srv.ProviderBodyMemory = 64<<10, 64<<10
	withProvider(t, srv)
	h := srv.Handler()
	large := strings.Repeat("x", 200<<10)

	r, w := io.Pipe()
	slow := make(chan *httptest.ResponseRecorder)
	go func() { slow <- deliver(h, "psp", signedHeaders(t, time.Now()), r, int64(len(large))) }()
	if _, err := io.WriteString(w, large[:150<<10]); err != nil { // returns once the server read it
		t.Fatal(err)
	}

	busy := deliver(h, "psp", signedHeaders(t, time.Now()), strings.NewReader(large), int64(len(large)))
	if busy.Code != http.StatusServiceUnavailable || busy.Header().Get("Retry-After") == "" {
		t.Errorf("a large delivery while the deliveries' budget is full: %d %s; want 503 with Retry-After", busy.Code, busy.Body)
	}
	create := largeCreate(100)
	if rec := keyedPost(h, "/v1/orders", "create", strings.NewReader(create), int64(len(create))); rec.Code != http.StatusCreated {
		t.Errorf("a create of %d bytes while the deliveries' budget is full: %d %s; want 201", len(create), rec.Code, rec.Body)
	}

	if _, err := io.WriteString(w, large[150<<10:]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if rec := <-slow; rec.Code != http.StatusUnauthorized {
		t.Errorf("the slow delivery: %d %s; want 401, its body signed otherwise", rec.Code, rec.Body)
	}
	for name, b := range map[string]*bodyBudget{"commands'": srv.bodyBudget(), "deliveries'": srv.providerBodyBudget()} {
		if !b.sem.TryAcquire(b.size) {
			t.Errorf("some of the %s budget still taken after every request; want none", name)
		}
	}
}

// largeCreate is a create of lines lines, each with a long SKU and name: some 390 bytes a line.
func largeCreate(lines int) string {
	var b strings.Builder
	b.WriteString(`{"customerId":"c-1","currency":"EUR","lines":[`)
	for i := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"%03d-%s","quantity":1,"unitPrice":100,"name":"%s"}`, i, strings.Repeat("s", 124), strings.Repeat("n", 200))
	}
	b.WriteString(`]}`)
	return b.String()
}
