package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// sentinels are every sentinel error, to check that a problem matches exactly one.
var sentinels = []error{ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrInFlight, ErrConflict,
	ErrRejected, ErrPreconditionFailed, ErrKeyReused, ErrUnavailable, ErrRedirect, ErrMalformedAnswer}

func TestProblemsMatchTheirSentinel(t *testing.T) {
	tests := []struct {
		code   string
		status int
		want   error // nil: no sentinel
	}{
		{"idempotency-key-missing", 400, ErrInvalid},
		{"idempotency-key-invalid", 400, ErrInvalid},
		{"malformed-request", 400, ErrInvalid},
		{"invalid-command", 400, ErrInvalid},
		{"unauthorized", 401, ErrUnauthorized},
		{"forbidden", 403, ErrForbidden},
		{"not-found", 404, ErrNotFound},
		{"method-not-allowed", 405, nil},
		{"idempotency-key-in-flight", 409, ErrInFlight},
		{"invalid-transition", 409, ErrRejected},
		{"concurrent-modification", 409, ErrConflict},
		{"rebuild-in-progress", 409, ErrConflict},
		{"precondition-failed", 412, ErrPreconditionFailed},
		{"payload-too-large", 413, ErrInvalid},
		{"unsupported-media-type", 415, ErrInvalid},
		{"idempotency-key-reused", 422, ErrKeyReused},
		{"command-rejected", 422, ErrRejected},
		{"payment-id-taken", 422, ErrRejected},
		{"headers-too-large", 431, ErrInvalid},
		{"internal", 500, nil},
		{"event-unreadable", 500, nil},
		{"unavailable", 503, ErrUnavailable},
		// Codes this client does not know: the status decides.
		{"a-later-code", 404, ErrNotFound},
		{"a-later-code", 422, ErrRejected},
		{"a-later-code", 503, ErrUnavailable},
		{"", 429, ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.code, tt.status), func(t *testing.T) {
			body := fmt.Sprintf(`{"type":"/problems/%s","title":"T","status":%d,"detail":"D","orderId":"o-1"}`, tt.code, tt.status)
			if tt.code == "" {
				body = "<html>slow down</html>"
			}
			p := problemOf(&answer{status: tt.status, header: http.Header{"X-Request-Id": {"r-1"}}, body: []byte(body)})
			var err error = fmt.Errorf("add line: %w", p)
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tt.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
			var as *Problem
			if !errors.As(err, &as) || as.Code != tt.code || as.Status != tt.status || as.RequestID != "r-1" {
				t.Errorf("errors.As: %+v", as)
			}
			if tt.code != "" && (as.Title != "T" || as.Detail != "D" || as.Extra["orderId"] != "o-1") {
				t.Errorf("problem %+v: want title, detail and the extra member orderId", as)
			}
		})
	}
}

// TestEveryServiceCodeIsKnown keeps the client's table up to date with the contract's
// x-problem-types: a code the service answers and the client does not name fails here.
func TestEveryServiceCodeIsKnown(t *testing.T) {
	unmatched := map[string]bool{"method-not-allowed": true, "internal": true, "event-unreadable": true,
		// Answered to payment providers' deliveries, which the client does not send.
		"delivery-unverified": true, "provider-event-malformed": true, "too-early": true}
	for _, pt := range contractProblemTypes(t) {
		if _, ok := sentinelByCode[pt.Code]; !ok && !unmatched[pt.Code] {
			t.Errorf("problem code %q (status %d) has no sentinel and is not listed as unmatched", pt.Code, pt.Status)
		}
	}
}

func TestProblemError(t *testing.T) {
	p := &Problem{Type: "/problems/not-found", Status: 404, Detail: "order x not found", Code: "not-found"}
	if got, want := p.Error(), "orders: 404 not-found: order x not found"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var q Problem
	if err := json.Unmarshal([]byte(`{"type":"/problems/x","status":"400"}`), &q); err == nil {
		t.Error("a status that is not a number decoded")
	}
}
