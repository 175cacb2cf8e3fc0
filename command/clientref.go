package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// ErrClientRefTaken: another order of the customer already has the client reference.
var ErrClientRefTaken = errors.New("client reference already used by another order of this customer")

// ClientRefPrefix starts the name of every client-reference claim stream.
const ClientRefPrefix = "clientref-"

// TypeClientRefClaimed is the event that claims a customer's client reference for an order.
const TypeClientRefClaimed = "client-reference.claimed.v1"

// ClientRefClaimed claims a client reference for an order.
type ClientRefClaimed struct {
	CustomerID      string `json:"customerId"`
	ClientReference string `json:"clientReference"`
	OrderID         string `json:"orderId"`
}

// ClientRefStream is the claim stream of a customer's client reference.
func ClientRefStream(customerID, ref string) string {
	sum := sha256.Sum256([]byte(customerID + "\x00" + ref))
	return ClientRefPrefix + hex.EncodeToString(sum[:])
}

// claimClientRef makes the create's client reference unique per customer: the claim stream is
// appended with expected revision NoStream, so of two orders only one gets it, as with
// idempotency keys. A claim already held by this order (a retried create) is fine.
func (h *Handler) claimClientRef(ctx context.Context, c order.CreateOrder, md Metadata) error {
	stream := ClientRefStream(c.CustomerID, c.ClientRef)
	data, err := json.Marshal(ClientRefClaimed{CustomerID: c.CustomerID, ClientReference: c.ClientRef, OrderID: c.OrderID})
	if err != nil {
		return err
	}
	_, err = h.Store.Append(ctx, stream, eventstore.NoStream,
		eventstore.EventData{ID: eventID(md, stream, 0), Type: TypeClientRefClaimed, Data: data})
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return err
	}
	for e, err := range h.Store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{Limit: 1}) {
		if err != nil {
			return fmt.Errorf("read client reference claim: %w", err)
		}
		var held ClientRefClaimed
		if err := json.Unmarshal(e.Data, &held); err != nil {
			return fmt.Errorf("client reference claim: %w", err)
		}
		if held.OrderID == c.OrderID {
			return nil
		}
	}
	return fmt.Errorf("%w: customer %s, reference %q", ErrClientRefTaken, c.CustomerID, c.ClientRef)
}
