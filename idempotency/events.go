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
	// TypeRecorded is a key's claim and outcome in one event (Recorded), which earlier releases
	// wrote as a TypeClaimed and a TypeCompleted.
	TypeRecorded = "idempotency.recorded.v1"
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
	// Position is the log position of the command's effect, which the intake tells as it
	// likes (api: the Log-Position header); 0 for an answer that has none. Outcomes recorded
	// before it was kept tell it among their Headers.
	Position uint64 `json:"position,omitempty"`
}

// Completed records the outcome of the request that held the key.
type Completed struct {
	Outcome
	OrderID     string    `json:"orderId"`
	CompletedAt time.Time `json:"completedAt"`
	At
}

// At names, for an outcome written in the same append as the command's events, the event whose
// log position is the outcome's Position, which the store had not told yet (Claim.AppendWithOutcome):
// a read of the key takes it from there (Keys.position).
type At struct {
	PositionStream   string `json:"positionStream,omitempty"`
	PositionRevision uint64 `json:"positionRevision,omitempty"`
}

// Recorded is a key's claim and its outcome in one event, written in one append with the
// command's events when the key was new and its outcome known before the append
// (Claim.AppendWithOutcome), or by Complete for a new key whose command wrote nothing. The claim's
// time is the outcome's.
type Recorded struct {
	Claimed
	Outcome
	At
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
	case TypeRecorded:
		var r Recorded
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		if s.first.Claimant == "" {
			s.first = r.Claimed
		}
		s.current, s.released = r.Claimed, false
		if s.done == nil {
			s.done = &Completed{Outcome: r.Outcome, OrderID: r.OrderID, CompletedAt: r.ClaimedAt, At: r.At}
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
	c.fields(&o)
	return o.Close()
}

func (c Claimed) fields(o *jsonenc.Object) {
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
}

func (c Claimed) encode() ([]byte, error) {
	size := 300 + len(c.Principal) + len(c.Key) + len(c.Method) + len(c.Path) + len(c.Fingerprint) + len(c.OrderID) + len(c.Claimant)
	return c.appendJSON(make([]byte, 0, size))
}

func (out Outcome) fields(o *jsonenc.Object) {
	o.Int("status", int64(out.Status))
	o.StringOmitEmpty("code", out.Code)
	o.StringMapOmitEmpty("headers", out.Headers)
	o.String("body", out.Body)
	o.IntOmitEmpty("position", int64(out.Position))
}

// size is about what the outcome takes encoded.
func (out Outcome) size() int {
	size := 100 + len(out.Code) + len(out.Body) + len(out.Body)/8
	for k, v := range out.Headers {
		size += len(k) + len(v) + 6
	}
	return size
}

func (at At) fields(o *jsonenc.Object) {
	o.StringOmitEmpty("positionStream", at.PositionStream)
	o.IntOmitEmpty("positionRevision", int64(at.PositionRevision))
}

func (c Completed) appendJSON(dst []byte) ([]byte, error) {
	o := jsonenc.Open(dst)
	c.Outcome.fields(&o)
	o.String("orderId", c.OrderID)
	o.Time("completedAt", c.CompletedAt)
	c.At.fields(&o)
	return o.Close()
}

func (c Completed) encode() ([]byte, error) {
	return c.appendJSON(make([]byte, 0, c.Outcome.size()+100+len(c.OrderID)+len(c.PositionStream)))
}

func (r Recorded) appendJSON(dst []byte) ([]byte, error) {
	o := jsonenc.Open(dst)
	r.Claimed.fields(&o)
	r.Outcome.fields(&o)
	r.At.fields(&o)
	return o.Close()
}

func (r Recorded) encode() ([]byte, error) {
	c := r.Claimed
	size := 300 + len(c.Principal) + len(c.Key) + len(c.Method) + len(c.Path) + len(c.Fingerprint) + len(c.OrderID) + len(c.Claimant)
	return r.appendJSON(make([]byte, 0, size+r.Outcome.size()+len(r.PositionStream)))
}
