package idempotency_test

import (
	"testing"

	"github.com/acme/orders/idempotency"
)

// A remembered fingerprint is the one Fingerprint computes, for the same bytes and for other
// encodings of the same body; another request gets its own.
func TestFingerprintsRemembersTheSameAnswers(t *testing.T) {
	for _, f := range []*idempotency.Fingerprints{nil, idempotency.NewFingerprints(2), idempotency.NewFingerprints(0)} {
		requests := []struct {
			method, path, body string
		}{
			{"POST", "/v1/orders", `{"b":1,"a":[1,2]}`},
			{"POST", "/v1/orders", `{"a":[1,2],"b":1}`},
			{"POST", "/v1/orders", `{"b":1,"a":[1,2]}`},
			{"POST", "/v1/orders/x/lines", `{"b":1,"a":[1,2]}`},
			{"POST", "/v1/orders", `{"b":2,"a":[1,2]}`},
			{"POST", "/v1/orders", ``},
			{"POST", "/v1/orders\n", `{"b":1,"a":[1,2]}`},
			{"POST", "/v1/orders", "\n{\"b\":1,\"a\":[1,2]}"},
			{"POST", "/v1/orders", `{"b":1,"a":[1,2]}`},
		}
		for i, r := range requests {
			want, err := idempotency.Fingerprint(r.method, r.path, []byte(r.body))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if got, err := f.Of(r.method, r.path, []byte(r.body)); err != nil || got != want {
					t.Errorf("request %d %+v: Of = %q, %v; want %q", i, r, got, err, want)
				}
			}
		}
		if _, err := f.Of("POST", "/v1/orders", []byte(`{"a":`)); err == nil {
			t.Error("a malformed body got a fingerprint")
		}
	}
}
