package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/acme/orders/fault"
)

// MaxKeyLen is the longest Idempotency-Key accepted.
const MaxKeyLen = 255

var (
	// ErrKeyMissing: a command that requires a key has none.
	ErrKeyMissing = fault.New(fault.Invalid, "idempotency-key-missing", "Idempotency-Key header is required")
	// ErrKeyInvalid: the key is empty, too long or not printable ASCII.
	ErrKeyInvalid = fault.New(fault.Invalid, "idempotency-key-invalid", "Idempotency-Key must be 1 to 255 printable ASCII characters")
	// ErrInFlight: the request that holds the key has not finished within the wait bound.
	ErrInFlight = fault.New(fault.InFlight, "", "a request with this Idempotency-Key is still in progress")
	// ErrTakenOver: while the request ran, its key was taken over by another (its lease ran
	// out), which now decides the outcome. It is an ErrInFlight to the client.
	ErrTakenOver = fmt.Errorf("%w: another request took the key over", ErrInFlight)
	// ErrMalformedBody: the body to fingerprint is not JSON.
	ErrMalformedBody = fault.New(fault.Invalid, "", "request body is not JSON")
)

// ValidateKey checks a key's form.
func ValidateKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return ErrKeyInvalid
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return ErrKeyInvalid
		}
	}
	return nil
}

// Fingerprint identifies a request: SHA-256 over the method, the path and the canonical form
// of the JSON body (object keys sorted, no insignificant whitespace, numbers as written), so
// that two encodings of the same request match. An empty body is fingerprinted as empty.
func Fingerprint(method, path string, body []byte) (string, error) {
	// What is hashed is built in one buffer, the size of the usual request's, and hashed at
	// once: method \n path \n canonical body.
	b := make([]byte, 0, len(method)+len(path)+2+len(body))
	b = append(b, method...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	b, err := appendCanonicalJSON(b, body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// appendCanonicalJSON appends the canonical form of body to dst: what encoding/json writes for
// the value it decodes, with numbers as written. Fingerprints are stored, so these bytes are
// fixed for good.
func appendCanonicalJSON(dst, body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return dst, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
	}
	// Decoder.More is false before a stray ] or }: look at what is left instead.
	if rest := body[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("%w: data after the JSON value", ErrMalformedBody)
	}
	// encoding/json writes map keys sorted and json.Number as written.
	out, err := json.Marshal(v)
	return append(dst, out...), err
}

// StreamName is the event stream of a principal's key.
func StreamName(principal, key string) string {
	b := make([]byte, 0, 2*MaxKeyLen+64) // on the stack for usual principals and keys
	b = append(b, principal...)
	b = append(b, 0)
	sum := sha256.Sum256(append(b, key...))
	var name [len(StreamPrefix) + 2*sha256.Size]byte
	copy(name[:], StreamPrefix)
	hex.Encode(name[len(StreamPrefix):], sum[:])
	return string(name[:])
}

// StreamPrefix starts the name of every key stream.
const StreamPrefix = "idempotency-"

// KeyHash is a key's identity for logs and metrics: the key itself never appears there.
func KeyHash(principal, key string) string {
	return StreamName(principal, key)[len(StreamPrefix):][:16]
}
