package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/acme/orders/jsonenc/jsonenctest"
)

// referenceCanonical is the canonical form as encoding/json writes it (canonicalJSON's way for
// the bodies canonical declines); ok is false for a body it refuses.
func referenceCanonical(body []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}

// sameCanonical fails if canonical writes other bytes than encoding/json for body, or takes
// a body encoding/json refuses.
func sameCanonical(t *testing.T, body []byte) (taken bool) {
	t.Helper()
	got, ok := canonical(nil, body)
	if !ok {
		return false
	}
	want, wantOK := referenceCanonical(body)
	if !wantOK || !bytes.Equal(got, want) {
		t.Fatalf("canonical(%q) = %s, encoding/json: %s (ok %v)", body, got, want, wantOK)
	}
	return true
}

// randomJSON writes a random value: objects with unsorted and repeated names, numbers in
// every form, strings of every kind, whitespace between tokens; sometimes a flaw.
func randomJSON(r *rand.Rand, strs []string, depth int) string {
	ws := func() string { return []string{"", " ", "\n\t", "\r "}[r.IntN(4)] }
	switch k := r.IntN(8); {
	case k == 0 && depth < 4:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			fmt.Fprintf(&b, "%s%s:%s%s", fmt.Sprintf("%q", strs[r.IntN(len(strs))%8+len(strs)-8]), ws(), ws(), randomJSON(r, strs, depth+1))
		}
		return b.String() + ws() + "}"
	case k == 1 && depth < 4:
		parts := make([]string, r.IntN(4))
		for i := range parts {
			parts[i] = ws() + randomJSON(r, strs, depth+1) + ws()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case k == 2:
		return []string{"0", "-0", "12", "-3.25", "1e5", "2.50E-3", "1E+2", "123456789012345678901234567890", "01", "1.", "-", ".5", "1e"}[r.IntN(13)]
	case k == 3:
		return []string{"true", "false", "null", "nul", "tru"}[r.IntN(5)]
	case k == 4:
		return `"` + []string{`a\"b`, `\u00e9`, `\n`, `\ud800`, "tab\there"}[r.IntN(5)] + `"`
	}
	s := strs[r.IntN(len(strs))]
	if r.IntN(2) == 0 {
		return `"` + s + `"` // raw, as a client may send it: maybe not JSON at all
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// The canonical form written from the bytes is encoding/json's, for every body it takes; it
// takes the bodies that requests send.
func TestCanonicalIsEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	strs := append(jsonenctest.Strings(r, 200), "a", "b", "a", "sku", "B", "é", "<x>", "line\u2028")
	taken := 0
	for range 20000 {
		body := randomJSON(r, strs, 0)
		for _, b := range []string{body, " " + body + "\n", body + " x", body + "\u00a0", "\v" + body} {
			if sameCanonical(t, []byte(b)) {
				taken++
			}
		}
	}
	create := `{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`
	if !sameCanonical(t, []byte(create)) || taken < 10000 {
		t.Fatalf("canonical took %d of the random bodies, and the create %v", taken, sameCanonical(t, []byte(create)))
	}
	deep := []byte(strings.Repeat("[", maxCanonicalDepth+1) + strings.Repeat("]", maxCanonicalDepth+1))
	if _, ok := canonical(nil, deep); ok {
		t.Fatal("canonical took a body nested deeper than maxCanonicalDepth")
	}
}

// FuzzCanonicalIsEncodingJSONs: canonical writes encoding/json's bytes for any body it takes.
func FuzzCanonicalIsEncodingJSONs(f *testing.F) {
	r := rand.New(rand.NewPCG(21, 22))
	strs := jsonenctest.Strings(r, 50)
	for range 50 {
		f.Add([]byte(randomJSON(r, strs, 0)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameCanonical(t, body)
	})
}

// BenchmarkCanonical writes a create's canonical form from its bytes (bytes, into a buffer of
// the body's size, as Fingerprint does) and through encoding/json's decoded value
// (encoding-json).
func BenchmarkCanonical(b *testing.B) {
	body := []byte(`{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			referenceCanonical(body)
		}
	})
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canonical(make([]byte, 0, len(body)), body)
		}
	})
}
