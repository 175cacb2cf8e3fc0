package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acme/orders/idempotency"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{strings.Repeat("k", 255), true},
		{"order-1 retry #2 ~!", true},
		{"", false},
		{strings.Repeat("k", 256), false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"café", false},
	} {
		err := idempotency.ValidateKey(tc.key)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, idempotency.ErrKeyInvalid)) {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, path, body string) string {
		t.Helper()
		f, err := idempotency.Fingerprint(method, path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := fp("POST", "/v1/orders", `{"a":1,"b":[1,2]}`)
	if got := fp("POST", "/v1/orders", " {\n\"b\": [1, 2], \"a\":1 } "); got != base {
		t.Error("key order and whitespace changed the fingerprint")
	}
	for name, other := range map[string]string{
		"method": fp("PUT", "/v1/orders", `{"a":1,"b":[1,2]}`),
		"path":   fp("POST", "/v1/orders/x", `{"a":1,"b":[1,2]}`),
		"value":  fp("POST", "/v1/orders", `{"a":2,"b":[1,2]}`),
		"order":  fp("POST", "/v1/orders", `{"a":1,"b":[2,1]}`),
		"number": fp("POST", "/v1/orders", `{"a":1.0,"b":[1,2]}`),
	} {
		if other == base {
			t.Errorf("another %s gave the same fingerprint", name)
		}
	}
	if fp("DELETE", "/v1/x", "") == fp("DELETE", "/v1/x", "{}") {
		t.Error("an empty body and {} gave the same fingerprint")
	}
	for _, bad := range []string{`{`, `{"a":1}{"b":2}`, `nope`} {
		if _, err := idempotency.Fingerprint("POST", "/", []byte(bad)); !errors.Is(err, idempotency.ErrMalformedBody) {
			t.Errorf("Fingerprint(%q): got %v, want ErrMalformedBody", bad, err)
		}
	}
}
