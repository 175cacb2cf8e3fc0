package idempotency

import (
	"crypto/sha256"
	"encoding/binary"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Fingerprints computes request fingerprints (see Fingerprint) and remembers them by a digest
// of the raw request, so that a retry that sends the same bytes, as retries do, costs one hash
// instead of decoding and encoding its body again: the canonical form was a tenth of the
// processor a replay took (docs/benchmarks.md). A nil *Fingerprints remembers nothing.
type Fingerprints struct {
	memo *lru.Cache[[sha256.Size]byte, string]
}

// NewFingerprints remembers the fingerprints of the last n distinct requests; n <= 0 means none.
func NewFingerprints(n int) *Fingerprints {
	if n <= 0 {
		return nil
	}
	memo, _ := lru.New[[sha256.Size]byte, string](n) // n > 0 cannot fail
	return &Fingerprints{memo: memo}
}

// Of returns Fingerprint(method, path, body).
func (f *Fingerprints) Of(method, path string, body []byte) (string, error) {
	if f == nil {
		return Fingerprint(method, path, body)
	}
	raw := digest(method, path, body)
	if fp, ok := f.memo.Get(raw); ok {
		return fp, nil
	}
	fp, err := Fingerprint(method, path, body)
	if err == nil {
		f.memo.Add(raw, fp)
	}
	return fp, err
}

// Known returns the fingerprint of a request whose very bytes Of fingerprinted recently, at
// the cost of a hash; ok is false for any other. A caller that gives Of only requests it has
// checked knows that the bytes of a known request passed its checks.
func (f *Fingerprints) Known(method, path string, body []byte) (fp string, ok bool) {
	if f == nil {
		return "", false
	}
	return f.memo.Get(digest(method, path, body))
}

// digest identifies the bytes of a request.
func digest(method, path string, body []byte) [sha256.Size]byte {
	// Lengths first, so that no two requests write the same bytes (a path may hold a newline).
	h := sha256.New()
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], uint64(len(method)))
	binary.BigEndian.PutUint64(n[8:], uint64(len(path)))
	h.Write(n[:])
	h.Write([]byte(method))
	h.Write([]byte(path))
	h.Write(body)
	var raw [sha256.Size]byte
	h.Sum(raw[:0])
	return raw
}
