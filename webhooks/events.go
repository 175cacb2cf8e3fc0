package webhooks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// Stream names. Every webhook stream starts with StreamPrefix, which no order, key or claim
// stream does, so that projections and the audit verifier (which select "order-" and
// "idempotency-" streams) never see them.
const (
	StreamPrefix = "webhook-"
	// endpointPrefix + id: the endpoint's registration and every change of it (the audit trail).
	endpointPrefix = "webhook-endpoint-"
	// indexStream names every endpoint changed, so that a node finds them all without reading
	// the whole log.
	indexStream = "webhook-index"
	// deliveryPrefix + id: the endpoint's delivery checkpoints, each one also the lease of the
	// node that delivers.
	deliveryPrefix = "webhook-delivery-"
	// backupPrefix + id: the last checkpoint while its delivery stream was compacted by
	// copying, before the store could truncate; read if a crash left it the only one.
	backupPrefix = "webhook-delivery-backup-"
	// slotsPrefix + a hash of a principal: the principal's endpoints, counted against
	// Config.MaxEndpoints on every node (see slots.go).
	slotsPrefix = "webhook-slots-"
	// deadPrefix + id: the endpoint's dead letters and the retries asked for them.
	deadPrefix = "webhook-dead-"
)

// Event types of the webhook streams. The names and JSON fields are a stored format.
const (
	TypeRegistered     = "webhook.endpoint-registered.v1"
	TypeSecretRotated  = "webhook.secret-rotated.v1"
	TypeDisabled       = "webhook.endpoint-disabled.v1"
	TypeEnabled        = "webhook.endpoint-enabled.v1"
	TypeDeleted        = "webhook.endpoint-deleted.v1"
	TypeIndexed        = "webhook.endpoint-changed.v1"
	TypeCheckpoint     = "webhook.delivery-checkpoint.v1"
	TypeDeadLettered   = "webhook.delivery-dead-lettered.v1"
	TypeRetryRequested = "webhook.delivery-retry-requested.v1"
	TypeSlots          = "webhook.endpoint-slots.v1"
	TypeVoided         = "webhook.endpoint-voided.v1"
)

// Secret is a signing secret as stored: sealed with the operator's key (see Sealer), never
// in clear.
type Secret struct {
	Sealed    string    `json:"sealed"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is set on a secret that a rotation replaced: it signs beside the new one until
	// then.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Registered opens an endpoint's stream.
type Registered struct {
	ID          string    `json:"id"`
	Principal   string    `json:"principal"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Description string    `json:"description"`
	Secret      Secret    `json:"secret"`
	At          time.Time `json:"at"`
}

// SecretRotated replaces the signing secret; the previous one signs on until Previous.ExpiresAt.
type SecretRotated struct {
	Secret Secret `json:"secret"`
	// Key is the request's Idempotency-Key, so that its retry gets this secret again.
	Key string    `json:"key,omitempty"`
	By  string    `json:"by"`
	At  time.Time `json:"at"`
}

// Disabled stops deliveries to the endpoint; Enabled resumes them where they stopped.
type Disabled struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Enabled resumes deliveries.
type Enabled struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Deleted ends the endpoint: nothing is delivered to it again.
type Deleted struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Indexed names an endpoint that changed, in indexStream.
type Indexed struct {
	ID string `json:"id"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	At        time.Time `json:"at"`
	Status    int       `json:"status,omitempty"` // the receiver's HTTP status; 0 if none came
	LatencyMS float64   `json:"latencyMs"`
	Error     string    `json:"error,omitempty"`
}

// Delivery is one order event on its way to one endpoint. Its id is the event's id, the
// webhook-id on every attempt.
type Delivery struct {
	ID       string              `json:"id"`
	Stream   string              `json:"stream"`
	Revision uint64              `json:"revision"`
	Position eventstore.Position `json:"position"`
	OrderID  string              `json:"orderId"`
	Type     string              `json:"type"` // the webhook event type, order.paid say
	Recorded time.Time           `json:"recorded"`
	// Attempts are the latest tries (at most Config.MaxAttemptRecords); Tries counts them all.
	Attempts []Attempt `json:"attempts,omitempty"`
	Tries    int       `json:"tries"`
	Next     time.Time `json:"next"`
	// Manual marks a delivery re-sent by hand from the dead letters.
	Manual bool `json:"manual,omitempty"`
}

// Checkpoint is the delivery state of an endpoint, and the lease of the node that delivers
// for it (Node): every matching event at or before Cursor was delivered, dead-lettered, or is
// in Pending. It holds no expiry: another node takes the lease over once it has seen no new
// checkpoint for Config.Lease by its own clock (see runner.acquire).
type Checkpoint struct {
	Node    string              `json:"node"`
	Cursor  eventstore.Position `json:"cursor"`
	Pending []Delivery          `json:"pending"`
	// DeadRead is how much of the dead-letter stream was read for retries asked by hand.
	DeadRead uint64 `json:"deadRead"`
	// FailingSince is when the endpoint began failing without a success since; zero if it is
	// not failing.
	FailingSince time.Time `json:"failingSince,omitzero"`
	At           time.Time `json:"at"`
}

// DeadLettered records a delivery given up after its last retry.
type DeadLettered struct {
	Delivery
	At time.Time `json:"at"`
}

// RetryRequested asks for a dead letter to be sent again.
type RetryRequested struct {
	DeliveryID string    `json:"deliveryId"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
}

// newEvent encodes v as an event of type typ with a time-ordered id.
func newEvent(typ string, v any) (eventstore.EventData, error) {
	return eventWithID(uuid.Must(uuid.NewV7()), typ, v)
}

func eventWithID(id uuid.UUID, typ string, v any) (eventstore.EventData, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return eventstore.EventData{}, fmt.Errorf("encode %s: %w", typ, err)
	}
	return eventstore.EventData{ID: id, Type: typ, Data: data}, nil
}
