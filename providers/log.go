package providers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// LogPrefix starts the name of every stream of the provider log: one stream for each event a
// provider delivered that names no order the service knows, or reports nothing it acts on.
const LogPrefix = "providerlog-"

// TypeUnapplied is the event of the provider log.
const TypeUnapplied = "provider-event.unapplied.v1"

// Unapplied is a provider's event recorded without being applied to an order, for auditors.
type Unapplied struct {
	Provider   string    `json:"provider"`
	Principal  string    `json:"principal"` // the provider's
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	PaymentID  string    `json:"paymentId,omitempty"`
	OrderID    string    `json:"orderId,omitempty"` // what the event named, if anything
	Reason     string    `json:"reason"`
	ReceivedAt time.Time `json:"receivedAt"`
}

// LogStream is the provider log's stream of the event id of provider, whose principal is
// principal.
func LogStream(principal, provider, eventID string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + provider + "\x00" + eventID))
	return LogPrefix + hex.EncodeToString(sum[:])
}

// LogAppend is the append that records u in the provider log, once per event: its stream is
// written only if it does not exist (expected NoStream), with an event id derived from it. The
// keyed pipeline makes it with the record of the event's key (keyed.Unapplied):
// a redelivery of the event is answered from its key, or, once the key has expired, from the
// record that stands (Recorded).
func LogAppend(u Unapplied) (eventstore.StreamAppend, error) {
	stream := LogStream(u.Principal, u.Provider, u.EventID)
	data, err := json.Marshal(u)
	if err != nil {
		return eventstore.StreamAppend{}, err
	}
	ev := eventstore.EventData{ID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(stream)), Type: TypeUnapplied, Data: data}
	return eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream, Events: []eventstore.EventData{ev}}, nil
}

// Recorded returns the record of event id of provider in the provider log, if there is one.
func Recorded(ctx context.Context, store eventstore.Store, principal, provider, eventID string) (Unapplied, bool, error) {
	stream := LogStream(principal, provider, eventID)
	e, found, err := eventstore.First(ctx, store, stream)
	if err != nil || !found {
		return Unapplied{}, false, err
	}
	var u Unapplied
	if err := json.Unmarshal(e.Data, &u); err != nil {
		return Unapplied{}, false, fmt.Errorf("the provider log %s: %w", stream, err)
	}
	return u, true, nil
}
