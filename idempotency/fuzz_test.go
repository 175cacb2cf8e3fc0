package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/acme/orders/idempotency"
)

// FuzzValidateKey checks ValidateKey against the contract's own words: 1 to 255 characters,
// printable ASCII (0x20–0x7E) only. Seeds: testdata/fuzz/FuzzValidateKey.
func FuzzValidateKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string) {
		want := len(key) >= 1 && len(key) <= idempotency.MaxKeyLen
		for i := 0; i < len(key); i++ {
			want = want && key[i] >= 0x20 && key[i] <= 0x7e
		}
		err := idempotency.ValidateKey(key)
		if (err == nil) != want || (err != nil && !errors.Is(err, idempotency.ErrKeyInvalid)) {
			t.Fatalf("ValidateKey(%q) = %v, want valid=%v", key, err, want)
		}
		if err == nil {
			// A valid key names one stream per principal, and never shows in its hash.
			a, b := idempotency.StreamName("p", key), idempotency.StreamName("q", key)
			if a == b || a != idempotency.StreamName("p", key) || len(idempotency.KeyHash("p", key)) != 16 {
				t.Fatalf("StreamName/KeyHash(%q): %s, %s, %s", key, a, b, idempotency.KeyHash("p", key))
			}
		}
	})
}

// bugTrailingData is the server bug FuzzFingerprint shares with api's decoding: the check for
// data after the JSON value is json.Decoder.More, which reports false before ']' or '}'.
const bugTrailingData = "a body with ']' or '}' after its JSON value is fingerprinted as the value alone, not refused as malformed"

// FuzzFingerprint fingerprints arbitrary requests. A body is fingerprinted if and only if it
// is one JSON value (or blank); otherwise the error is ErrMalformedBody. The fingerprint does
// not depend on the body's whitespace or key order: the same value re-indented, compacted or
// re-encoded gets the same one. Seeds: testdata/fuzz/FuzzFingerprint.
func FuzzFingerprint(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		fp, err := idempotency.Fingerprint(method, path, body)
		blank := len(bytes.TrimSpace(body)) == 0
		valid := blank || json.Valid(body)
		switch {
		case err != nil && !errors.Is(err, idempotency.ErrMalformedBody):
			t.Fatalf("Fingerprint(%q): %v, want ErrMalformedBody", body, err)
		case err != nil && valid:
			t.Fatalf("Fingerprint(%q): %v, but it is one JSON value", body, err)
		case err == nil && !valid:
			t.Fatalf("Fingerprint(%q) accepted a body that is not one JSON value: %s", body, bugTrailingData)
		case err != nil || blank:
			return
		}
		if len(fp) != 64 {
			t.Fatalf("Fingerprint(%q) = %q, want 64 hex digits", body, fp)
		}
		var indented, compact bytes.Buffer
		if err := json.Indent(&indented, body, "\t", "  "); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&compact, body); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		reencoded, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for name, other := range map[string][]byte{"indented": indented.Bytes(), "compacted": compact.Bytes(), "re-encoded": reencoded} {
			if got, err := idempotency.Fingerprint(method, path, other); err != nil || got != fp {
				t.Fatalf("Fingerprint of %q %s as %q: %s, %v; want %s", body, name, other, got, err, fp)
			}
		}
	})
}
