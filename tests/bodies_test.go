package tests

import (
	"net/http"
	"testing"
)

// Two bodies whose members differ only in case and order decode to two different commands
// (encoding/json matches names case-insensitively and keeps the last), while their canonical
// forms, by which the key's fingerprint is taken, are one: the second must not be answered
// with the first's outcome. Names are read as written, once each.
func TestFieldNamesThatDifferOnlyInCaseAreRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "case-create", "c-case")
	pay := "/v1/orders/" + id + "/payments"
	first := s.doInvalid(t, "POST", pay, "case-pay", `{"paymentId":"p-case","amount":2000,"AMOUNT":1}`)
	again := s.doInvalid(t, "POST", pay, "case-pay", `{"paymentId":"p-case","AMOUNT":1,"amount":2000}`)
	if again.replayed() == "true" {
		t.Errorf("%v replays %v: two commands held as one request", again, first)
	}
	checkProblem(t, first, http.StatusBadRequest, "malformed-request")
	checkProblem(t, again, http.StatusBadRequest, "malformed-request")
	for _, body := range []string{
		`{"paymentId":"p-case","Amount":2000}`,
		`{"paymentId":"p-case","amount":1,"amount":2000}`,
		`{"paymentId":"p-case","amount":2000,"paymentID":"p-other"}`,
	} {
		checkProblem(t, s.doInvalid(t, "POST", pay, "case-pay-2", body), http.StatusBadRequest, "malformed-request")
	}
	// Nested members too: a line's.
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders", "case-create-2",
		`{"customerId":"c","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPrice":1,"SKU":"b"}]}`),
		http.StatusBadRequest, "malformed-request")

	// The key was not used by any of them: the command as the contract spells it runs.
	paying := s.do(t, "POST", pay, "case-pay", map[string]any{"paymentId": "p-case", "amount": orderTotal})
	wantStatus(t, paying, http.StatusOK)
	checkFirst(t, paying)
}

// An escaped lone UTF-16 surrogate is not text: refused, not stored as U+FFFD. A pair is one
// character.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, v := range []string{`\ud800`, `\udc00`, `x\ud83dy`, `\ud83d\u0041`} {
		r := s.doInvalid(t, "POST", "/v1/orders", "surrogate", `{"customerId":"`+v+`","currency":"EUR"}`)
		checkProblem(t, r, http.StatusBadRequest, "malformed-request")
	}
	r := s.do(t, "POST", "/v1/orders", "surrogate", `{"customerId":"c-\ud83d\ude00","currency":"EUR"}`)
	wantStatus(t, r, http.StatusCreated)
	if got := r.str("customerId"); got != "c-😀" {
		t.Errorf("%v: customerId %q; want %q", r, got, "c-😀")
	}
}
