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
				if got, err := f.Of(f.Digest(r.method, r.path, []byte(r.body)), r.method, r.path, []byte(r.body)); err != nil || got != want {
					t.Errorf("request %d %+v: Of = %q, %v; want %q", i, r, got, err, want)
				}
			}
		}
		if _, err := f.Of(f.Digest("POST", "/v1/orders", []byte(`{"a":`)), "POST", "/v1/orders", []byte(`{"a":`)); err == nil {
			t.Error("a malformed body got a fingerprint")
		}
	}
}

// Known knows the bytes of a request Of fingerprinted, and nothing else: not another encoding
// of its body, not a body Of refused.
func TestFingerprintsKnowsOnlyWhatOfSaw(t *testing.T) {
	var none *idempotency.Fingerprints
	if _, ok := none.Known(none.Digest("POST", "/v1/orders", []byte(`{}`))); ok {
		t.Error("a nil Fingerprints knows a request")
	}
	f := idempotency.NewFingerprints(4)
	body := []byte(`{"b":1,"a":2}`)
	if _, ok := f.Known(f.Digest("POST", "/v1/orders", body)); ok {
		t.Error("a request is known before Of saw it")
	}
	want, err := f.Of(f.Digest("POST", "/v1/orders", body), "POST", "/v1/orders", body)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Known(f.Digest("POST", "/v1/orders", body)); !ok || got != want {
		t.Errorf("Known = %q, %v; want %q, true", got, ok, want)
	}
	for _, r := range [][2]string{{"/v1/orders", `{"a":2,"b":1}`}, {"/v1/orders/", `{"b":1,"a":2}`}} {
		if _, ok := f.Known(f.Digest("POST", r[0], []byte(r[1]))); ok {
			t.Errorf("%s %s is known; Of never saw its bytes", r[0], r[1])
		}
	}
	_, _ = f.Of(f.Digest("POST", "/v1/orders", []byte(`{"a":`)), "POST", "/v1/orders", []byte(`{"a":`))
	if _, ok := f.Known(f.Digest("POST", "/v1/orders", []byte(`{"a":`))); ok {
		t.Error("a body Of refused is known")
	}
}
