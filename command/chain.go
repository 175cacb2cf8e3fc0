package command

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
)

// The hash chain makes an order's stream tamper-evident. Every event the handler appends
// carries, in its metadata, the hash of the previous event of its stream ("prevHash") and its
// own hash ("hash"). The first event chains from Genesis. An auditor recomputes the chain from
// the stored bytes alone:
//
//	hash = hex(SHA-256(
//	    "orders.chain.v1" 0x00
//	    prevHash 0x00            (64 lowercase hex digits)
//	    stream 0x00
//	    revision 0x00            (decimal)
//	    type 0x00
//	    len(data) data           (len as 8 bytes big-endian; data as stored)
//	    len(m) m))               (m: the stored metadata without its hash member)
//
// The stored metadata is a JSON object whose first member is the hash:
// {"hash":"<64 hex>",<rest>}. m is those bytes with the member `"hash":"<64 hex>",` removed,
// that is "{" followed by <rest>. Because the hash covers the stored bytes and not a re-encoding,
// any tool can recompute it without a JSON canonicalisation.

// Genesis is the prevHash of an order's first event.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// ChainHash computes an event's hash as described above; m is its metadata without the hash.
func ChainHash(prevHash, stream string, revision uint64, typ string, data, m []byte) string {
	var sum [2 * sha256.Size]byte
	chainHash(&sum, prevHash, stream, revision, typ, data, m)
	return string(sum[:])
}

// chainHash is ChainHash written into sum, hex-encoded: the preimage is built in one buffer,
// on the stack for the events of a usual command, and hashed at once.
func chainHash(sum *[2 * sha256.Size]byte, prevHash, stream string, revision uint64, typ string, data, m []byte) {
	b := make([]byte, 0, 1024)
	b = append(b, "orders.chain.v1\x00"...)
	b = append(b, prevHash...)
	b = append(b, 0)
	b = append(b, stream...)
	b = append(b, 0)
	b = strconv.AppendUint(b, revision, 10)
	b = append(b, 0)
	b = append(b, typ...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(len(data)))
	b = append(b, data...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(m)))
	b = append(b, m...)
	raw := sha256.Sum256(b)
	hex.Encode(sum[:], raw[:])
}

// hashPrefix opens every chained metadata object.
const hashPrefix = `{"hash":"`

// ErrNoHash: the metadata does not start with a hash member.
var ErrNoHash = errors.New("metadata carries no chain hash")

// hashMember is the length of `"hash":"<64 hex>",` plus the opening brace.
const hashMember = len(hashPrefix) + 64 + len(`",`)

// SplitHash returns the hash stored in metadata and the metadata without it (m above).
func SplitHash(metadata []byte) (hash string, m []byte, err error) {
	hash = StoredHash(metadata)
	if hash == "" {
		return "", nil, ErrNoHash
	}
	return hash, append([]byte{'{'}, metadata[hashMember:]...), nil
}

// StoredHash returns the hash stored in metadata, or "" if it has none.
func StoredHash(metadata []byte) string {
	if len(metadata) < hashMember || !bytes.HasPrefix(metadata, []byte(hashPrefix)) || string(metadata[hashMember-2:hashMember]) != `",` {
		return ""
	}
	return string(metadata[len(hashPrefix) : len(hashPrefix)+64])
}

// chained encodes md for the event at revision of stream, chained after prevHash; it returns
// the metadata to store and the event's hash. The stored metadata is the hash member, then md
// as encoding/json writes it, its opening brace replaced by the member's comma: the hash is
// over md's bytes as stored, so their encoder must not change a byte.
func chained(md Metadata, prevHash, stream string, revision uint64, typ string, data []byte) ([]byte, string, error) {
	md.PrevHash = prevHash
	m, err := json.Marshal(md)
	if err != nil {
		return nil, "", err
	}
	out := make([]byte, hashMember-1+len(m))
	copy(out[hashMember-1:], m)
	var sum [2 * sha256.Size]byte
	chainHash(&sum, prevHash, stream, revision, typ, data, out[hashMember-1:])
	n := copy(out, hashPrefix)
	n += copy(out[n:], sum[:])
	copy(out[n:], `",`)
	return out, string(sum[:]), nil
}
