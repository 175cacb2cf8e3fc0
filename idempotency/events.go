package idempotency

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/jsonenc"
	"github.com/google/uuid"
)

// Event types of a key stream. The names and JSON fields are a stored format.
const (
	TypeClaimed   = "idempotency.claimed.v1"
	TypeCompleted = "idempotency.completed.v1"
	TypeReleased  = "idempotency.released.v1"
)

// Claimed records that a request holds the key. A takeover appends another one.
type Claimed struct {
	Principal   string    `json:"principal"`
	Key         string    `json:"key"`
	Method      string    `json:"method"`
	Path        string    `json:"path"`
	Fingerprint string    `json:"fingerprint"`
	OrderID     string    `json:"orderId"`
	Claimant    string    `json:"claimant"`
	ClaimedAt   time.Time `json:"claimedAt"`
	LeaseUntil  time.Time `json:"leaseUntil"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// Outcome is a response as stored and replayed.
type Outcome struct {
	Status int `json:"status"`
	// Code names a refusal (the problem type's code), for metrics and logs; outcomes recorded
	// before it was kept have none.
	Code    string            `json:"code,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body exactly as first sent.
	Body string `json:"body"`
}

// Completed records the outcome of the request that held the key.
type Completed struct {
	Outcome
	OrderID     string    `json:"orderId"`
	CompletedAt time.Time `json:"completedAt"`
	// PositionHeader, if set, is a header of the outcome whose value is the log position of
	// the event PositionRevision of the stream PositionStream, written in the same append as
	// this one (Claim.PendingWith), when the store had not told that position yet. It is not
	// among the stored Headers: it is added from that event before the outcome is answered
	// (Keys.position).
	PositionHeader   string `json:"positionHeader,omitempty"`
	PositionStream   string `json:"positionStream,omitempty"`
	PositionRevision uint64 `json:"positionRevision,omitempty"`
}

// Released records that the holder gave the key up without an outcome to keep (a 5xx): the
// next request with the key runs the command again.
type Released struct {
	Reason     string    `json:"reason"`
	ReleasedAt time.Time `json:"releasedAt"`
}

// keyState is a key stream folded.
type keyState struct {
	exists   bool
	revision uint64
	first    Claimed // the original claim: its fingerprint, order and expiry hold for good
	current  Claimed // the latest claim or takeover
	done     *Completed
	released bool
}

func (s *keyState) apply(e eventstore.RecordedEvent) error {
	s.exists, s.revision = true, e.Revision
	switch e.Type {
	case TypeClaimed:
		var c Claimed
		if err := json.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		if s.first.Claimant == "" {
			s.first = c
		}
		s.current, s.released = c, false
	case TypeCompleted:
		var c Completed
		if err := json.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		if s.done == nil { // a takeover's late duplicate outcome does not replace the first
			s.done = &c
		}
	case TypeReleased:
		s.released = true
	}
	return nil
}

// newEvent is an event of a key stream with its encoded data.
func newEvent(typ string, data []byte) eventstore.EventData {
	// Time-ordered ids (UUIDv7): the embedded store's index of event ids then grows at its
	// end instead of at a random page for each key event, which raised appends to new streams
	// from about 18,000 to 24,000 events/s (BenchmarkAppendNewStreams in eventstore/sqlite).
	// Like uuid.New, it panics only if the system's random source fails.
	return eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: typ, Data: data}
}

// The events every key writes are encoded as encoding/json writes them, byte for byte
// (TestKeyEventsAreEncodingJSONs), without its reflection: a claim and an outcome per command.

func (c Claimed) appendJSON(dst []byte) ([]byte, error) {
	o := jsonenc.Open(dst)
	o.String("principal", c.Principal)
	o.String("key", c.Key)
	o.String("method", c.Method)
	o.String("path", c.Path)
	o.String("fingerprint", c.Fingerprint)
	o.String("orderId", c.OrderID)
	o.String("claimant", c.Claimant)
	o.Time("claimedAt", c.ClaimedAt)
	o.Time("leaseUntil", c.LeaseUntil)
	o.Time("expiresAt", c.ExpiresAt)
	return o.Close()
}

func (c Claimed) encode() ([]byte, error) {
	size := 300 + len(c.Principal) + len(c.Key) + len(c.Method) + len(c.Path) + len(c.Fingerprint) + len(c.OrderID) + len(c.Claimant)
	return c.appendJSON(make([]byte, 0, size))
}

func (c Completed) appendJSON(dst []byte) ([]byte, error) {
	o := jsonenc.Open(dst)
	o.Int("status", int64(c.Status))
	o.StringOmitEmpty("code", c.Code)
	o.StringMapOmitEmpty("headers", c.Headers)
	o.String("body", c.Body)
	o.String("orderId", c.OrderID)
	o.Time("completedAt", c.CompletedAt)
	o.StringOmitEmpty("positionHeader", c.PositionHeader)
	o.StringOmitEmpty("positionStream", c.PositionStream)
	o.IntOmitEmpty("positionRevision", int64(c.PositionRevision))
	return o.Close()
}

func (c Completed) encode() ([]byte, error) {
	size := 200 + len(c.Code) + len(c.Body) + len(c.OrderID) + len(c.PositionHeader) + len(c.PositionStream)
	for k, v := range c.Headers {
		size += len(k) + len(v) + 6
	}
	return c.appendJSON(make([]byte, 0, size+len(c.Body)/8))
}
