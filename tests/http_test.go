package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestStaleIfMatchIsRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, created := s.create(t, "if-match-create", "c-if-match")
	v := created.num("version")
	if v != 2 || created.header.Get("ETag") != etag(v) {
		t.Fatalf("%v with ETag %q; want version 2 and ETag %s", created, created.header.Get("ETag"), etag(2))
	}
	if got := s.order(t, id); got.header.Get("ETag") != etag(v) || got.num("version") != v {
		t.Errorf("GET: %v with ETag %q; want version %d and ETag %s", got, got.header.Get("ETag"), v, etag(v))
	}

	added := s.command(t, id, "/lines", "if-match-current", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}, "If-Match", etag(v))
	if added.header.Get("ETag") != etag(v+1) || added.num("version") != v+1 {
		t.Errorf("%v with ETag %q; want version %d and ETag %s", added, added.header.Get("ETag"), v+1, etag(v+1))
	}

	// The order moved on: the ETag the client holds from the create is stale.
	stale := s.do(t, "POST", "/v1/orders/"+id+"/lines", "if-match-stale", line{SKU: "sku-3", Quantity: 1, UnitPrice: 700}, "If-Match", etag(v))
	checkProblem(t, stale, http.StatusPreconditionFailed, "precondition-failed")
	stale = s.do(t, "PUT", "/v1/orders/"+id+"/lines/sku-1", "", map[string]any{"quantity": 9}, "If-Match", etag(v))
	checkProblem(t, stale, http.StatusPreconditionFailed, "precondition-failed")
	if o := s.order(t, id); o.num("version") != v+1 || o.num("total") != orderTotal+500 {
		t.Errorf("after stale If-Match: %v; want version %d, total %d", o, v+1, orderTotal+500)
	}

	current := s.command(t, id, "/lines", "if-match-current-2", line{SKU: "sku-3", Quantity: 1, UnitPrice: 700}, "If-Match", added.header.Get("ETag"))
	if current.header.Get("ETag") != etag(v+2) {
		t.Errorf("%v with ETag %q; want %s", current, current.header.Get("ETag"), etag(v+2))
	}
	p1, err1 := strconv.ParseUint(added.header.Get("Log-Position"), 10, 64)
	p2, err2 := strconv.ParseUint(current.header.Get("Log-Position"), 10, 64)
	if err1 != nil || err2 != nil || p2 <= p1 {
		t.Errorf("Log-Position %q then %q; want increasing integers",
			added.header.Get("Log-Position"), current.header.Get("Log-Position"))
	}
}

func TestBadInputIsA4xxProblem(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "bad-input-setup", "c-bad")
	const unknownOrder = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	huge := `{"customerId":"c-1","currency":"EUR","clientReference":"` + strings.Repeat("x", 2<<20) + `"}`
	deep := `{"customerId":"c-1","currency":"EUR","lines":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`

	const (
		malformed = "malformed-request"
		invalid   = "invalid-command"
	)
	for _, tc := range []struct {
		name, method, path string
		body               any // sent as is
		header             []string
		status             int
		codes              []string // the acceptable problem codes
		// notStored: refused before the command runs, so the same key then runs a valid
		// create. Where the contract leaves open whether the domain refused it (and the
		// outcome was stored), the row does not check it.
		notStored bool
	}{
		{"not JSON", "POST", "/v1/orders", `{"customerId": "c-1",`, nil, 400, []string{malformed}, true},
		{"JSON array", "POST", "/v1/orders", `[{"customerId":"c-1","currency":"EUR"}]`, nil, 400, []string{malformed}, true},
		{"JSON null", "POST", "/v1/orders", `null`, nil, 400, []string{malformed}, true},
		{"wrong type", "POST", "/v1/orders", `{"customerId":42,"currency":"EUR"}`, nil, 400, []string{malformed}, true},
		{"wrong nested type", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"s","quantity":"two","unitPrice":100}]}`, nil, 400, []string{malformed}, true},
		{"unknown field", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR","discount":10}`, nil, 400, []string{malformed}, true},
		{"missing required field", "POST", "/v1/orders", `{"currency":"EUR"}`, nil, 400, []string{malformed}, true},
		{"trailing data", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR"} {"x":1}`, nil, 400, []string{malformed}, true},
		{"deep nesting", "POST", "/v1/orders", deep, nil, 400, []string{malformed}, true},
		{"number beyond int64", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"s","quantity":1,"unitPrice":100000000000000000000000}]}`, nil, 400, []string{malformed, invalid}, false},
		{"fractional amount", "POST", "/v1/orders/" + id + "/payments", `{"paymentId":"p-1","amount":20.5}`, nil, 400, []string{malformed, invalid}, false},
		{"negative quantity", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"s","quantity":-1,"unitPrice":100}]}`, nil, 400, []string{malformed, invalid}, false},
		{"zero quantity", "POST", "/v1/orders/" + id + "/lines", `{"sku":"s","quantity":0,"unitPrice":100}`, nil, 400, []string{malformed, invalid}, false},
		{"quantity too large", "PUT", "/v1/orders/" + id + "/lines/sku-1", `{"quantity":1000000}`, nil, 400, []string{malformed, invalid}, false},
		{"bad currency", "POST", "/v1/orders", `{"customerId":"c-1","currency":"euro"}`, nil, 400, []string{malformed, invalid}, false},
		{"invalid UTF-8", "POST", "/v1/orders", "{\"customerId\":\"c-\xff\",\"currency\":\"EUR\"}", nil, 400, []string{malformed, invalid}, false},
		{"empty carrier", "POST", "/v1/orders/" + id + "/shipments", `{"carrier":"","trackingNumber":"T-1"}`, nil, 400, []string{malformed, invalid}, false},
		{"2 MiB body", "POST", "/v1/orders", huge, nil, 413, []string{"payload-too-large"}, true},
		{"wrong Content-Type", "POST", "/v1/orders", `{"customerId":"c-1","currency":"EUR"}`, []string{"Content-Type", "text/plain"}, 415, []string{"unsupported-media-type"}, true},
		{"empty body", "POST", "/v1/orders", nil, []string{"Content-Type", "application/json"}, 400, []string{malformed}, true},
		{"no body, no Content-Type", "POST", "/v1/orders", nil, nil, 400, []string{malformed}, true},
		{"unknown order", "POST", "/v1/orders/" + unknownOrder + "/cancel", `{"reason":"r"}`, nil, 404, []string{"not-found"}, false},
		{"GET unknown order", "GET", "/v1/orders/" + unknownOrder, nil, nil, 404, []string{"not-found"}, false},
		{"unknown route", "GET", "/v1/nowhere", nil, nil, 404, []string{"not-found"}, false},
		{"method not allowed", "DELETE", "/v1/orders", nil, nil, 405, []string{"method-not-allowed"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := ""
			if tc.method == "POST" {
				key = "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			}
			r := s.doInvalid(t, tc.method, tc.path, key, tc.body, tc.header...)
			if r.status < 400 || r.status >= 500 {
				t.Fatalf("%v; want a %d problem", r, tc.status)
			}
			if r.status != tc.status {
				t.Errorf("%v; want status %d", r, tc.status)
			}
			checkProblemShape(t, r)
			if code := strings.TrimPrefix(r.problem(), "/problems/"); !slices.Contains(tc.codes, code) {
				t.Errorf("%v; want a problem of type %v", r, tc.codes)
			}
			if tc.notStored {
				ok := s.do(t, "POST", "/v1/orders", key, orderFor("c-after-"+key))
				createdID(t, ok)
				checkFirst(t, ok)
			}
		})
	}

	// None of it touched the order, and valid requests still work.
	if o := s.order(t, id); o.num("version") != 2 {
		t.Errorf("after bad input: %v; want the order unchanged at version 2", o)
	}
	s.command(t, id, "/lines", "bad-input-after", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
}

func TestServiceEndpoints(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	doc := s.do(t, "GET", "/openapi.yaml", "", nil)
	wantStatus(t, doc, http.StatusOK)
	if ct := doc.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("GET /openapi.yaml: Content-Type %q, want application/yaml", ct)
	}
	if !bytes.Equal(doc.body, openAPIDoc) {
		t.Errorf("GET /openapi.yaml served %d bytes that differ from api/openapi.yaml (%d bytes)", len(doc.body), len(openAPIDoc))
	}

	for path, status := range map[string]string{"/healthz": "ok", "/readyz": "ready"} {
		r := s.do(t, "GET", path, "", nil)
		if r.status != http.StatusOK || r.str("status") != status {
			t.Errorf("%v; want 200 {\"status\":%q}", r, status)
		}
	}

	problem := s.do(t, "GET", "/problems/idempotency-key-missing", "", nil)
	if problem.status != http.StatusOK || !strings.HasPrefix(problem.header.Get("Content-Type"), "text/plain") || len(problem.body) == 0 {
		t.Errorf("%v (Content-Type %q); want 200 text/plain", problem, problem.header.Get("Content-Type"))
	}

	// X-Request-Id is echoed on every response, replays included, and made up when absent.
	for i, tc := range []struct {
		method, path, key string
		body              any
		status            int
	}{
		{"GET", "/healthz", "", nil, 200},
		{"POST", "/v1/orders", "request-id", orderFor("c-request-id"), 201},
		{"POST", "/v1/orders", "request-id", orderFor("c-request-id"), 201}, // a replay
		{"GET", "/v1/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", nil, 404},
	} {
		id := fmt.Sprintf("e2e-request-%d", i)
		r := s.do(t, tc.method, tc.path, tc.key, tc.body, "X-Request-Id", id)
		if r.status != tc.status || r.header.Get("X-Request-Id") != id {
			t.Errorf("%v with X-Request-Id %q; want status %d and X-Request-Id %q", r, r.header.Get("X-Request-Id"), tc.status, id)
		}
	}
	a := s.do(t, "GET", "/healthz", "", nil).header.Get("X-Request-Id")
	b := s.do(t, "GET", "/healthz", "", nil).header.Get("X-Request-Id")
	if a == "" || a == b {
		t.Errorf("without X-Request-Id the responses carried %q and %q; want two distinct generated ids", a, b)
	}
}
