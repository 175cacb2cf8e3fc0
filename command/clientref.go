package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/acme/orders/fault"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// ErrClientRefTaken: another order of the principal's customer already has the client
// reference.
var ErrClientRefTaken = fault.New(fault.Rejected, "", "client reference already used by another order of this customer")

// ClientRefPrefix starts the name of every client-reference claim stream.
const ClientRefPrefix = "clientref-"

// TypeClientRefClaimed is the event that claims a customer's client reference for an order.
const TypeClientRefClaimed = "client-reference.claimed.v1"

// ClientRefClaimed claims a client reference for an order.
type ClientRefClaimed struct {
	// Principal is the order's creator.
	Principal       string `json:"principal,omitempty"`
	CustomerID      string `json:"customerId"`
	ClientReference string `json:"clientReference"`
	OrderID         string `json:"orderId"`
}

// ClientRefStream is the claim stream of a principal's client reference for one of its
// customers. Clients name their customers themselves: two clients' "c-1" are two customers.
func ClientRefStream(principal, customerID, ref string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + customerID + "\x00" + ref))
	return ClientRefPrefix + hex.EncodeToString(sum[:])
}

// clientRefClaim returns the append that claims the create's client reference for its order,
// unique per principal and customer: the claim stream is appended with expected revision
// NoStream, with the order's events, so of two orders only one gets it, as with idempotency
// keys. If it is refused, claimHeld tells whether the claim is this order's after all (a retried
// create).
func clientRefClaim(c order.CreateOrder, md Metadata) (eventstore.StreamAppend, error) {
	stream := ClientRefStream(md.Principal, c.CustomerID, c.ClientRef)
	data, err := json.Marshal(ClientRefClaimed{Principal: md.Principal, CustomerID: c.CustomerID, ClientReference: c.ClientRef, OrderID: c.OrderID})
	if err != nil {
		return eventstore.StreamAppend{}, err
	}
	return eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream,
		Events: []eventstore.EventData{{ID: eventID(md, c.OrderID, stream, 0), Type: TypeClientRefClaimed, Data: data}}}, nil
}

// claimHolder returns the order that the claim in stream is for, if there is one: a client
// reference's claim and a payment id's name it alike.
func (h *Handler) claimHolder(ctx context.Context, stream string) (orderID string, found bool, err error) {
	e, found, err := eventstore.First(ctx, h.Store, stream)
	if err != nil || !found {
		return "", false, err
	}
	var held struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(e.Data, &held); err != nil {
		return "", false, fmt.Errorf("the claim %s: %w", stream, err)
	}
	return held.OrderID, true, nil
}
