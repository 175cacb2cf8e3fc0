package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/jsonenc/jsonenctest"
)

// The claims and outcomes of keys are a stored format: their encoders write what
// encoding/json writes, for every field empty or not and any string or header.
func TestKeyEventsAreEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	gen := jsonenctest.NewValues(r, 300)
	pick, at := gen.String, gen.Time
	var claims, outcomes, recorded jsonenctest.Fields
	defer func() { claims.Check(t); outcomes.Check(t); recorded.Check(t) }()
	for i := range 3000 {
		c := Claimed{Principal: pick(), Key: pick(), Method: pick(), Path: pick(), Fingerprint: pick(), OrderID: pick(),
			Claimant: pick(), ClaimedAt: at(), LeaseUntil: at(), ExpiresAt: at()}
		claims.Note(c)
		same(t, c, c.encode)
		out := Outcome{Status: r.IntN(600) - i%2, Code: pick(), Body: pick() + `{"id":"` + pick() + `"}` + "\n",
			Position: uint64(r.IntN(2)) * r.Uint64N(1<<40)}
		if n := r.IntN(12); n > 0 {
			out.Headers = map[string]string{}
			for range n {
				out.Headers[pick()] = pick()
			}
		}
		ref := At{PositionStream: pick(), PositionRevision: uint64(r.IntN(2)) * r.Uint64N(1<<40)}
		d := Completed{Outcome: out, OrderID: pick(), CompletedAt: at(), At: ref}
		outcomes.Note(d)
		same(t, d, d.encode)
		rec := Recorded{Claimed: c, Outcome: out, At: ref}
		recorded.Note(rec)
		same(t, rec, rec.encode)
	}
}

func same(t *testing.T, v any, encode func() ([]byte, error)) {
	t.Helper()
	want, _ := json.Marshal(v)
	if got, err := encode(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%+v:\n got %s (%v)\nwant %s", v, got, err, want)
	}
}

// Key streams and fingerprints are stored: they are what they were first written as.
func TestStreamNameAndFingerprintAreAsFirstWritten(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	strs := jsonenctest.Strings(r, 200)
	for i, p := range strs {
		k := strs[(i*7)%len(strs)] + strings.Repeat("k", r.IntN(3)*200)
		sum := sha256.Sum256([]byte(p + "\x00" + k))
		if got, want := StreamName(p, k), StreamPrefix+hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("StreamName(%q, %q) = %s, want %s", p, k, got, want)
		}
	}
	bodies := []string{"", "  ", `{"b":1,"a":[1,2.50,"x<y"]}`, `{"a":1} `, `{"a":1}}`, `[1] ]`, `{"a":"\u00e9\ud800"}`, `nul`, `{"a":1}{"b":2}`, "\t[]\n"}
	for _, s := range strs {
		bodies = append(bodies, fmt.Sprintf(`{"s":%q,"n":%d}`, s, r.IntN(100)), fmt.Sprintf(`{"s":%q} x`, s))
	}
	for i, b := range bodies {
		m, p := strs[i%len(strs)], strs[(i*3)%len(strs)]
		got, err := Fingerprint(m, p, []byte(b))
		want, wantErr := referenceFingerprint(m, p, []byte(b))
		if got != want || (err == nil) != (wantErr == nil) {
			t.Fatalf("Fingerprint(%q, %q, %q) = %s (%v), want %s (%v)", m, p, b, got, err, want, wantErr)
		}
	}
}

// referenceFingerprint is Fingerprint as first written.
func referenceFingerprint(method, path string, body []byte) (string, error) {
	var canonical []byte
	if len(bytes.TrimSpace(body)) > 0 {
		r := bytes.NewReader(body)
		dec := json.NewDecoder(r)
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", err
		}
		if rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), r)); len(bytes.TrimSpace(rest)) > 0 {
			return "", ErrMalformedBody
		}
		canonical, _ = json.Marshal(v)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", method, path)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BenchmarkKeyEvents encodes a create's claim and outcome as the keys do (encode) and as
// encoding/json did (encoding-json).
func BenchmarkKeyEvents(b *testing.B) {
	now := time.Now()
	c := Claimed{Principal: "tenant-1", Key: "bench-create-123456", Method: "POST", Path: "/v1/orders",
		Fingerprint: "5f0c2b4e8d6a1f3c7b9e0d2a4c6e8f1a3b5d7f9e1c3a5b7d9f0e2c4a6b8d0f2e", OrderID: "01JDQ2Z8V3M1K4Y6T9B2C5N7PX",
		Claimant: "node-1/01JDQ2Z8V3M1K4Y6T9B2C5N7PY", ClaimedAt: now, LeaseUntil: now.Add(10 * time.Second), ExpiresAt: now.Add(24 * time.Hour)}
	d := Completed{Outcome: Outcome{Status: 201, Headers: map[string]string{"Content-Type": "application/json", "ETag": `"0"`,
		"Log-Position": "123456", "Location": "/v1/orders/01JDQ2Z8V3M1K4Y6T9B2C5N7PX"},
		Body: `{"id":"01JDQ2Z8V3M1K4Y6T9B2C5N7PX","customerId":"c-000123","currency":"EUR","channel":"api","status":"pending","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}],"total":2500,"paid":0,"refunded":0,"version":1,"createdAt":"2026-12-02T05:00:00.123456789Z","updatedAt":"2026-12-02T05:00:00.123456789Z"}` + "\n"},
		OrderID: "01JDQ2Z8V3M1K4Y6T9B2C5N7PX", CompletedAt: now}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(c)
			_, _ = json.Marshal(d)
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = c.encode()
			_, _ = d.encode()
		}
	})
}
