package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acme/orders/access"
)

const dispatchedCreate = `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPrice":100}]}`

// A dispatched command and an HTTP request of the same principal and key are one key: the
// second gets the first's answer, replayed byte for byte.
func TestDispatchSharesKeysWithHTTP(t *testing.T) {
	srv, _ := newServer(t, nil)
	h := srv.Handler()
	shop := access.Caller{Principal: devPrincipal, Roles: access.RoleClient}
	header := http.Header{"Idempotency-Key": {"k-1"}, "Content-Type": {"application/json"}}
	status, got, body := srv.Dispatch(context.Background(), shop, http.MethodPost, "/v1/orders", header, []byte(dispatchedCreate))
	if status != http.StatusCreated || got.Get("Location") == "" {
		t.Fatalf("dispatched create: %d %v %s", status, got, body)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(dispatchedCreate))
	req.Header = header.Clone()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "true" || rec.Body.String() != string(body) {
		t.Errorf("the HTTP retry: %d %v %s; want the dispatched answer replayed: %s", rec.Code, rec.Header(), rec.Body, body)
	}
	status, got, _ = srv.Dispatch(context.Background(), shop, http.MethodPost, "/v1/orders", header, []byte(dispatchedCreate))
	if status != http.StatusCreated || got.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the dispatched retry: %d %v; want 201 replayed", status, got)
	}
}

// Dispatch answers as the API does: a missing key, a caller without the role, an unknown
// route, a method the route does not take, a key reused for another body.
func TestDispatchAnswersAsTheAPI(t *testing.T) {
	srv, _ := newServer(t, nil)
	srv.Handler()
	shop := access.Caller{Principal: devPrincipal, Roles: access.RoleClient}
	keyed := func(k string) http.Header {
		return http.Header{"Idempotency-Key": {k}, "Content-Type": {"application/json"}}
	}
	if status, _, _ := srv.Dispatch(context.Background(), shop, http.MethodPost, "/v1/orders", keyed("k-1"), []byte(dispatchedCreate)); status != http.StatusCreated {
		t.Fatalf("create: %d", status)
	}
	for _, tc := range []struct {
		name         string
		caller       access.Caller
		method, path string
		header       http.Header
		body         string
		status       int
		problem      string
	}{
		{"no key", shop, http.MethodPut, "/v1/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV/lines/a", http.Header{}, `{"quantity":2}`, 400, "idempotency-key-missing"},
		{"auditor", access.Caller{Principal: "audit", Roles: access.RoleAuditor}, http.MethodPost, "/v1/orders", keyed("k-2"), dispatchedCreate, 403, "forbidden"},
		{"unknown route", shop, http.MethodPost, "/v1/nothing", keyed("k-3"), "{}", 404, "not-found"},
		{"method", shop, http.MethodPost, "/v1/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV/lines/a", keyed("k-4"), "{}", 405, "method-not-allowed"},
		{"key reused", shop, http.MethodPost, "/v1/orders", keyed("k-1"), `{"customerId":"c-2","currency":"EUR"}`, 422, "idempotency-key-reused"},
		{"malformed", shop, http.MethodPost, "/v1/orders", keyed("k-5"), `{"customerId":`, 400, "malformed-request"},
	} {
		status, h, body := srv.Dispatch(context.Background(), tc.caller, tc.method, tc.path, tc.header, []byte(tc.body))
		if status != tc.status || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "/problems/"+tc.problem) {
			t.Errorf("%s: %d %v %s; want %d %s", tc.name, status, h, body, tc.status, tc.problem)
		}
	}
}

// An HTTP request cannot pass for a dispatched one: without a key it is 401 on a server with
// keys, whatever it sends.
func TestDispatchOpensNoWayInOverHTTP(t *testing.T) {
	srv, _ := newServer(t, nil)
	srv.APIKeys = APIKeys{{Principal: "shop", Hash: HashKey("k"), Roles: access.RoleClient}}
	h := srv.Handler()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(dispatchedCreate))
	req.Header.Set("Idempotency-Key", "k-1")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a request without a key: %d; want 401", rec.Code)
	}
	status, _, body := srv.Dispatch(context.Background(), access.Caller{Principal: "shop", Roles: access.RoleClient}, http.MethodPost, "/v1/orders",
		http.Header{"Idempotency-Key": {"k-1"}, "Content-Type": {"application/json"}, "Authorization": {"Bearer nope"}}, []byte(dispatchedCreate))
	if status != http.StatusCreated {
		t.Errorf("dispatched with a stray Authorization header: %d %s; want 201", status, body)
	}
}
