package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Money is an amount in minor units of the order's currency (cents for EUR).
type Money int64

// Order statuses.
const (
	StatusCreated   = "created"
	StatusPaying    = "paying"
	StatusPaid      = "paid"
	StatusShipped   = "shipped"
	StatusCancelled = "cancelled"
	StatusRefunding = "refunding"
	StatusRefunded  = "refunded"
)

// Order is an order as the service answers it (schema Order).
type Order struct {
	ID                    string            `json:"id"`
	CustomerID            string            `json:"customerId"`
	Currency              string            `json:"currency"`
	ClientReference       string            `json:"clientReference,omitempty"`
	Channel               string            `json:"channel,omitempty"`
	Status                string            `json:"status"`
	Lines                 []Line            `json:"lines"`
	Total                 Money             `json:"total"`
	Paid                  Money             `json:"paid"`
	Refunded              Money             `json:"refunded"`
	PaymentID             string            `json:"paymentId,omitempty"`
	RefundID              string            `json:"refundId,omitempty"`
	Carrier               string            `json:"carrier,omitempty"`
	TrackingNumber        string            `json:"trackingNumber,omitempty"`
	DuplicateCharges      []DuplicateCharge `json:"duplicateCharges,omitempty"`
	DuplicateChargeCount  int               `json:"duplicateChargeCount,omitempty"`
	DuplicateChargeTotal  Money             `json:"duplicateChargeTotal,omitempty"`
	DuplicateChargeEvents string            `json:"duplicateChargeEvents,omitempty"`
	// Version is the number of the order's events; WithIfMatch(Version) makes a command apply
	// to this state only.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// check reports an order without a member that every order has, from its creation on.
func (o *Order) check() error {
	switch {
	case o.ID == "":
		return errors.New("order without an id")
	case o.CustomerID == "" || o.Currency == "" || o.Status == "":
		return fmt.Errorf("order %s without a customer, currency or status", o.ID)
	case o.Version < 1:
		return fmt.Errorf("order %s at version %d", o.ID, o.Version)
	}
	return nil
}

// Line is a line of an order (schema Line).
type Line struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"`
	Quantity  int    `json:"quantity"`
	UnitPrice Money  `json:"unitPrice"`
}

// DuplicateCharge is money captured for an order that it did not accept, to be refunded
// (schema DuplicateCharge).
type DuplicateCharge struct {
	PaymentID string `json:"paymentId"`
	Amount    Money  `json:"amount"`
	Reason    string `json:"reason"`
}

// CreateOrderRequest is the body of CreateOrder (schema CreateOrderRequest).
type CreateOrderRequest struct {
	CustomerID      string      `json:"customerId"`
	Currency        string      `json:"currency"`
	Lines           []LineInput `json:"lines,omitempty"`
	ClientReference string      `json:"clientReference,omitempty"`
	Channel         string      `json:"channel,omitempty"`
}

// LineInput is a line to add (schema LineInput).
type LineInput struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"`
	Quantity  int    `json:"quantity"`
	UnitPrice Money  `json:"unitPrice"`
}

// changeLineQuantityRequest is the body of ChangeLineQuantity (schema ChangeLineQuantityRequest).
type changeLineQuantityRequest struct {
	Quantity int `json:"quantity"`
}

// StartPaymentRequest is the body of StartPayment (schema StartPaymentRequest).
type StartPaymentRequest struct {
	PaymentID string `json:"paymentId"`
	Amount    Money  `json:"amount"`
}

// ShipRequest is the body of Ship (schema ShipRequest).
type ShipRequest struct {
	Carrier        string `json:"carrier"`
	TrackingNumber string `json:"trackingNumber"`
}

// RequestRefundRequest is the body of RequestRefund (schema RequestRefundRequest).
type RequestRefundRequest struct {
	RefundID string `json:"refundId"`
	Amount   Money  `json:"amount"`
}

// confirmPaymentRequest is the body of ConfirmPayment and ConfirmPaymentByID (schema ConfirmPaymentRequest).
type confirmPaymentRequest struct {
	Amount Money `json:"amount"`
}

// reasonRequest is the body of Cancel and FailPayment (schema ReasonRequest).
type reasonRequest struct {
	Reason string `json:"reason"`
}

// orderPage is a page of ListOrders (schema OrderPage).
type orderPage struct {
	Orders []Order `json:"orders"`
	Next   string  `json:"next,omitempty"`
}

func (p *orderPage) check() error {
	if p.Orders == nil {
		return errors.New("page without orders")
	}
	for i := range p.Orders {
		if err := p.Orders[i].check(); err != nil {
			return err
		}
	}
	return nil
}

// Event is an event of an order's stream, with who caused it (schema Event).
type Event struct {
	Revision   int64     `json:"revision"`
	Position   uint64    `json:"position"`
	Type       string    `json:"type"` // such as "order.payment-confirmed.v1"
	RecordedAt time.Time `json:"recordedAt"`
	// StoredType is the type the event is stored as, when it is read upcast from an earlier
	// version; "" otherwise.
	StoredType string          `json:"storedType,omitempty"`
	Data       json.RawMessage `json:"data"` // in the versioned format Type names
	Metadata   EventMetadata   `json:"metadata"`
}

// EventMetadata says who did what (schema EventMetadata). The service may add fields.
type EventMetadata struct {
	Principal      string    `json:"principal,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Fingerprint    string    `json:"fingerprint,omitempty"`
	CorrelationID  string    `json:"correlationId,omitempty"`
	CausationID    string    `json:"causationId,omitempty"`
	Command        string    `json:"command,omitempty"`
	At             time.Time `json:"at,omitzero"`
	Hash           string    `json:"hash,omitempty"`
	PrevHash       string    `json:"prevHash,omitempty"`
}

// eventPage is a page of Events (schema Events).
type eventPage struct {
	Events []Event `json:"events"`
	Next   *int64  `json:"next,omitempty"`
}

func (p *eventPage) check() error {
	if p.Events == nil {
		return errors.New("page without events")
	}
	for _, e := range p.Events {
		if e.Type == "" {
			return fmt.Errorf("event %d without a type", e.Revision)
		}
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
