package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest identifies the bytes of a request (method, path and body): a retry that sends the
// very bytes of a request that ran with its key, as retries do, is replayed from memory without
// its fingerprint (Keys.RecallBytes).
type Digest [sha256.Size]byte

// DigestOf returns the digest of a request's bytes.
func DigestOf(method, path string, body []byte) Digest {
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
