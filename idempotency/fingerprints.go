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
	memo *lru.Cache[Digest, string]
}

// NewFingerprints remembers the fingerprints of the last n distinct requests; n <= 0 means none.
func NewFingerprints(n int) *Fingerprints {
	if n <= 0 {
		return nil
	}
	memo, _ := lru.New[Digest, string](n) // n > 0 cannot fail
	return &Fingerprints{memo: memo}
}

// Digest identifies the bytes of a request (method, path and body): Fingerprints.Digest hashes
// them once for both Known and Of.
type Digest [sha256.Size]byte

// Digest returns the digest of a request's bytes, or the zero Digest if f remembers nothing.
func (f *Fingerprints) Digest(method, path string, body []byte) Digest {
	if f == nil {
		return Digest{}
	}
	return digest(method, path, body)
}

// Of returns Fingerprint(method, path, body), whose bytes have digest d (f.Digest).
func (f *Fingerprints) Of(d Digest, method, path string, body []byte) (string, error) {
	if f == nil {
		return Fingerprint(method, path, body)
	}
	if fp, ok := f.memo.Get(d); ok {
		return fp, nil
	}
	fp, err := Fingerprint(method, path, body)
	if err == nil {
		f.memo.Add(d, fp)
	}
	return fp, err
}

// Known returns the fingerprint of a request whose very bytes (digest d, see f.Digest) Of
// fingerprinted recently, at the cost of a lookup; ok is false for any other. A caller that
// gives Of only requests it has checked knows that the bytes of a known request passed its
// checks.
func (f *Fingerprints) Known(d Digest) (fp string, ok bool) {
	if f == nil {
		return "", false
	}
	return f.memo.Get(d)
}

// digest identifies the bytes of a request.
func digest(method, path string, body []byte) Digest {
	// Lengths first, so that no two requests write the same bytes (a path may hold a newline).
	h := sha256.New()
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], uint64(len(method)))
	binary.BigEndian.PutUint64(n[8:], uint64(len(path)))
	h.Write(n[:])
	h.Write([]byte(method))
	h.Write([]byte(path))
	h.Write(body)
	var raw Digest
	h.Sum(raw[:0])
	return raw
}
