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

	"github.com/acme/orders/internal/jsontest"
)

// Key streams and fingerprints are stored: they are what they were first written as.
func TestStreamNameAndFingerprintAreAsFirstWritten(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	strs := jsontest.Strings(r, 200)
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
