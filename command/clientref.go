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
	// Principal is the order's creator; claims from before they were per principal have none.
	Principal       string `json:"principal,omitempty"`
	CustomerID      string `json:"customerId"`
	ClientReference string `json:"clientReference"`
	OrderID         string `json:"orderId"`
}

// ClientRefStream is the claim stream of a principal's client reference for one of its
// customers. Clients name their customers themselves: two clients' "c-1" are two customers.
func ClientRefStream(principal, customerID, ref string) string {
	return clientRefStream(principal + "\x00" + customerID + "\x00" + ref)
}

// legacyClientRefStream is the claim stream that creates took before claims were per principal
// (see clientRefClaim). Nothing is appended to these any more.
func legacyClientRefStream(customerID, ref string) string {
	return clientRefStream(customerID + "\x00" + ref)
}

func clientRefStream(name string) string {
	sum := sha256.Sum256([]byte(name))
	return ClientRefPrefix + hex.EncodeToString(sum[:])
}

// clientRefClaim returns the append that claims the create's client reference for its order,
// unique per principal and customer: the claim stream is appended with expected revision
// NoStream, with the order's events, so of two orders only one gets it, as with idempotency
// keys. If it is refused, claimHeld tells whether the claim is this order's after all (a retried
// create).
//
// Orders created before claims were per principal hold theirs in the legacy stream, named by
// customer and reference alone. Such a claim still refuses the reference to another order of
// the principal that created its order; an order of another principal is no collision, and
// neither is an order that was never created (its create failed or was abandoned). The legacy
// stream is read until ScanLegacyClientRefs has found that the store holds no legacy claim.
func (h *Handler) clientRefClaim(ctx context.Context, c order.CreateOrder, md Metadata) (eventstore.StreamAppend, error) {
	if !h.noLegacyRefs.Load() {
		if err := h.legacyRefHeld(ctx, c, md); err != nil {
			return eventstore.StreamAppend{}, err
		}
	}
	stream := ClientRefStream(md.Principal, c.CustomerID, c.ClientRef)
	data, err := json.Marshal(ClientRefClaimed{Principal: md.Principal, CustomerID: c.CustomerID, ClientReference: c.ClientRef, OrderID: c.OrderID})
	if err != nil {
		return eventstore.StreamAppend{}, err
	}
	return eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream,
		Events: []eventstore.EventData{{ID: eventID(md, c.OrderID, stream, 0), Type: TypeClientRefClaimed, Data: data}}}, nil
}

// legacyRefHeld returns ErrClientRefTaken if the legacy claim of the create's customer and
// reference is another order's of the principal md names, and nil if there is no such claim.
func (h *Handler) legacyRefHeld(ctx context.Context, c order.CreateOrder, md Metadata) error {
	holder, ok, err := h.claimHolder(ctx, legacyClientRefStream(c.CustomerID, c.ClientRef))
	if err != nil || !ok || holder == c.OrderID {
		return err
	}
	o, err := h.Load(ctx, holder, "", "")
	if err != nil {
		return err
	}
	if o.State.Version > 0 && o.Owner == md.Principal {
		return refTaken(c)
	}
	return nil
}

func refTaken(c order.CreateOrder) error {
	return fmt.Errorf("%w: customer %s, reference %q", ErrClientRefTaken, c.CustomerID, c.ClientRef)
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
