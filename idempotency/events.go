package idempotency

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
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

// Claimed records that a request holds the key. A takeover appends another one. Claimant
// begins with the node's name (lease.Terms.Node) and a "/". LeaseUntil is for nodes of earlier
// releases, which compared it with their wall clocks: this one goes by its sighting of the claim
// (lease.Terms.Over), and still writes it so that such a node, mid-upgrade, does not take
// over a live claim.
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
	// likes; 0 for an answer that has none. Outcomes recorded before it was kept tell it among
	// their Headers.
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
		s.claim(c)
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
		s.claim(r.Claimed)
		if s.done == nil {
			s.done = &Completed{Outcome: r.Outcome, OrderID: r.OrderID, CompletedAt: r.ClaimedAt, At: r.At}
		}
	case TypeReleased:
		s.released = true
	}
	return nil
}

// claim folds a claim: a takeover within the key's life, or the first claim of a new life once
// the key expired (or its first claim is no longer read: the store let it age out), which
// leaves nothing of the old life.
func (s *keyState) claim(c Claimed) {
	if s.first.Claimant == "" || !c.ClaimedAt.Before(s.first.ExpiresAt) {
		*s = keyState{exists: true, revision: s.revision, first: c}
	}
	s.current, s.released = c, false
}

// newEvent is an event of a key stream with its encoded data.
func newEvent(typ string, data []byte) eventstore.EventData {
	// Time-ordered ids (UUIDv7): the embedded store's index of event ids then grows at its
	// end instead of at a random page for each key event, which raised appends to new streams
	// from about 18,000 to 24,000 events/s (BenchmarkAppendNewStreams in eventstore/sqlite).
	// Like uuid.New, it panics only if the system's random source fails.
	return eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: typ, Data: data}
}

func (c Claimed) encode() ([]byte, error)   { return json.Marshal(c) }
func (c Completed) encode() ([]byte, error) { return json.Marshal(c) }
func (r Recorded) encode() ([]byte, error)  { return json.Marshal(r) }
