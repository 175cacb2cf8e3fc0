package providers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// Record records u in the provider log, once per event: its stream is written only if it does
// not exist, so a redelivery, or one delivered to several nodes at once, records nothing more.
// It returns the record that stands: u, or the first.
func Record(ctx context.Context, store eventstore.Store, u Unapplied) (Unapplied, error) {
	stream := LogStream(u.Principal, u.Provider, u.EventID)
	data, err := json.Marshal(u)
	if err != nil {
		return Unapplied{}, err
	}
	ev := eventstore.EventData{ID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(stream)), Type: TypeUnapplied, Data: data}
	_, err = store.Append(ctx, stream, eventstore.NoStream, ev)
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		first, found, err := Recorded(ctx, store, u.Principal, u.Provider, u.EventID)
		if err == nil && !found {
			err = fmt.Errorf("provider log %s: refused as existing, read as missing", stream)
		}
		return first, err
	}
	if err != nil {
		return Unapplied{}, fmt.Errorf("record %s event %s in the provider log: %w", u.Provider, u.EventID, err)
	}
	return u, nil
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
