package command

import (
	"crypto/sha1"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// Metadata is stored with every event a command appends. The JSON names are part of the
// stored format.
type Metadata struct {
	Principal      string    `json:"principal,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Fingerprint    string    `json:"fingerprint,omitempty"`
	CorrelationID  string    `json:"correlationId,omitempty"`
	CausationID    string    `json:"causationId,omitempty"`
	Command        string    `json:"command"`
	At             time.Time `json:"at"`
	// PrevHash chains the event to the previous one of its stream (see ChainHash). The
	// event's own hash is stored before these fields, as the metadata's first member.
	PrevHash string `json:"prevHash,omitempty"`
}

// PrincipalOf is the principal in an event's stored metadata; "" if none or undecodable.
func PrincipalOf(metadata []byte) string {
	var md struct{ Principal string }
	json.Unmarshal(metadata, &md)
	return md.Principal
}

// eventIDSpace is the UUIDv5 namespace of derived event ids. Changing it, or anything else in
// eventID, makes a retry of a command run before the change append other ids than its first
// run: the store no longer takes the second append for a repeat, and the retry is recognised
// only by the order's stream, whose events carry their key (Handler.Load).
var eventIDSpace = uuid.MustParse("7d4e9a52-3c1b-4c55-9f3e-6a0d2b8e1f40")

// eventID returns the id of the index-th event that the command with md's key appends to
// stream for order orderID: the same inputs always give the same id, so a repeated append is a
// repeat to the store. The order's stream is part of it, so that a key reused after expiry on
// another order does not collide with the events of the first.
//
// Its first 48 bits are the time in the order's id (a ULID), as in a UUIDv7, and the rest is
// the hash: the ids of an order's events sort by when the order was created, so the embedded
// store's index of event ids takes them near its end, where the latest orders are, instead of
// on any of its pages (docs/benchmarks.md). An order id that is not a ULID keeps the whole hash.
func eventID(md Metadata, orderID, stream string, index int) uuid.UUID {
	if md.IdempotencyKey == "" {
		return uuid.Must(uuid.NewV7()) // time-ordered, for the store's id index (see idempotency's newEvent)
	}
	id := nameID(md.Principal, md.IdempotencyKey, stream, index)
	if u, err := ulid.ParseStrict(orderID); err == nil {
		copy(id[:6], u[:6])       // a ULID starts with its milliseconds, big-endian, as a UUIDv7 does
		id[6] = id[6]&0x0f | 0x80 // version 8: a layout of our own (RFC 9562); the variant stays
	}
	return id
}

// nameID is uuid.NewSHA1(eventIDSpace, principal 0x00 key 0x00 stream 0x00 index), the name
// built and hashed in one buffer on the stack rather than in a string and a hash of the heap.
func nameID(principal, key, stream string, index int) uuid.UUID {
	b := make([]byte, 0, 512)
	b = append(b, eventIDSpace[:]...)
	b = append(b, principal...)
	b = append(b, 0)
	b = append(b, key...)
	b = append(b, 0)
	b = append(b, stream...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	sum := sha1.Sum(b)
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = id[6]&0x0f | 0x50 // version 5 (name-based, SHA-1)
	id[8] = id[8]&0x3f | 0x80 // variant RFC 9562
	return id
}
