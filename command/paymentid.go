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

// ErrPaymentIDTaken: another order of the principal already started a payment with the id. A
// provider's callback names the payment id alone, so it must lead to one order.
var ErrPaymentIDTaken = fault.New(fault.Rejected, "payment-id-taken", "payment id already used by another order of this client")

// PaymentIDPrefix starts the name of every payment-id claim stream.
const PaymentIDPrefix = "paymentid-"

// TypePaymentIDClaimed is the event that claims a principal's payment id for an order.
const TypePaymentIDClaimed = "payment-id.claimed.v1"

// PaymentIDClaimed claims a payment id for an order.
type PaymentIDClaimed struct {
	Principal string `json:"principal"`
	PaymentID string `json:"paymentId"`
	OrderID   string `json:"orderId"`
}

// PaymentIDStream is the claim stream of a principal's payment id: clients choose their
// payment ids, so two clients' "pay-1" are two payments.
func PaymentIDStream(principal, paymentID string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + paymentID))
	return PaymentIDPrefix + hex.EncodeToString(sum[:])
}

// PaymentOrder returns the order of principal that claimed payment id paymentID, if one did.
func (h *Handler) PaymentOrder(ctx context.Context, principal, paymentID string) (orderID string, found bool, err error) {
	return h.claimHolder(ctx, PaymentIDStream(principal, paymentID))
}

// paymentIDClaim returns the append that claims the payment id that c starts for order id,
// unique per principal: the claim stream is appended with expected revision NoStream, with the
// order's events, so of two orders only one gets it, as with client references. If it is
// refused, claimHeld tells whether the claim is this order's after all (a payment started
// again after it failed, or a retry). Payments started before claims existed hold none: the
// first start of their id since claims it.
func paymentIDClaim(id string, c order.StartPayment, md Metadata) (eventstore.StreamAppend, error) {
	stream := PaymentIDStream(md.Principal, c.PaymentID)
	data, err := json.Marshal(PaymentIDClaimed{Principal: md.Principal, PaymentID: c.PaymentID, OrderID: id})
	if err != nil {
		return eventstore.StreamAppend{}, err
	}
	// The order is part of the id: the same key reused, after it expired, to start the payment
	// on another order must be refused, not taken for a repeat of the first claim.
	ev := eventstore.EventData{ID: eventID(md, id, stream+"\x00"+id, 0), Type: TypePaymentIDClaimed, Data: data}
	return eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream, Events: []eventstore.EventData{ev}}, nil
}

// claim returns the append that claims what c's events make the order's alone, if anything:
// a create's client reference, or the payment id a payment starts.
func claim(id string, c order.Command, md Metadata) (*eventstore.StreamAppend, error) {
	var a eventstore.StreamAppend
	var err error
	switch c := c.(type) {
	case order.CreateOrder:
		if c.ClientRef == "" {
			return nil, nil
		}
		a, err = clientRefClaim(c, md)
	case order.StartPayment:
		a, err = paymentIDClaim(id, c, md)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, claimErr(id, c, err)
	}
	return &a, nil
}

// claimHeld returns nil if the claim in stream, which c's append was refused, is the order
// id's after all (a retried create, a payment started again after it failed), and the error to
// answer c with if it is another's.
func (h *Handler) claimHeld(ctx context.Context, id string, c order.Command, stream string) error {
	holder, _, err := h.claimHolder(ctx, stream)
	switch c := c.(type) {
	case order.CreateOrder:
		if err == nil && holder != c.OrderID {
			err = fmt.Errorf("%w: customer %s, reference %q", ErrClientRefTaken, c.CustomerID, c.ClientRef)
		}
	case order.StartPayment:
		if err == nil && holder != id {
			err = fmt.Errorf("%w: payment %q", ErrPaymentIDTaken, c.PaymentID)
		}
	}
	if err != nil {
		return claimErr(id, c, err)
	}
	return nil
}

func claimErr(id string, c order.Command, err error) error {
	if _, ok := c.(order.CreateOrder); ok {
		return fmt.Errorf("create order %s: %w", id, err)
	}
	return fmt.Errorf("%s on order %s: %w", c.CommandName(), id, err)
}
