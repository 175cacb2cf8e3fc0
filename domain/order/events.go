package order

import "time"

// Event is a fact about an order. The set is closed: only this package's types implement it.
// Events hold domain facts only; the order id of the stream, who caused the event and with
// which idempotency key travel in the store's metadata. Every event has At, the time passed
// to Decide (in UTC), so that the state's timestamps come from the log and not from a clock.
//
// Events are stored as JSON under their EventType name; see Codec. Changing a field's name or
// meaning needs a new versioned type, never an edit of an existing one: the type of the
// previous version moves to upcast.go with an upcaster to the new one, so that events stored
// at every earlier version still read (see Codec.Unmarshal).
type Event interface {
	// EventType is the event's stable, versioned name, such as "order.created.v1".
	EventType() string

	occurredAt() time.Time
}

// Created opens an order. It is the only event that carries the order id: the stream already
// names the order, but a created event read on its own (in an export, an audit) should still
// say which order it founded.
type Created struct {
	OrderID    string    `json:"orderId"`
	CustomerID string    `json:"customerId"`
	Currency   Currency  `json:"currency"`
	ClientRef  string    `json:"clientRef"` // empty if the client gave none
	Channel    string    `json:"channel"`   // the sales channel; see CreateOrder
	At         time.Time `json:"at"`
}

// LineAdded adds a line for a SKU the order did not have.
type LineAdded struct {
	SKU       string    `json:"sku"`
	Name      string    `json:"name,omitempty"` // the product's name; empty if the client gave none
	Quantity  int64     `json:"quantity"`
	UnitPrice Money     `json:"unitPrice"`
	At        time.Time `json:"at"`
}

// LineQuantityChanged sets the quantity of an existing line. It carries the new quantity, not
// the difference, so the event reads on its own; AddLine on an existing SKU decides it too.
type LineQuantityChanged struct {
	SKU      string    `json:"sku"`
	Quantity int64     `json:"quantity"`
	At       time.Time `json:"at"`
}

// LineRemoved removes the line for a SKU.
type LineRemoved struct {
	SKU string    `json:"sku"`
	At  time.Time `json:"at"`
}

// PaymentStarted freezes the lines: the order awaits the provider's confirmation of payment
// PaymentID for Amount, the total at that moment.
type PaymentStarted struct {
	PaymentID string    `json:"paymentId"`
	Amount    Money     `json:"amount"`
	At        time.Time `json:"at"`
}

// PaymentConfirmed records the order's one accepted payment.
type PaymentConfirmed struct {
	PaymentID string    `json:"paymentId"`
	Amount    Money     `json:"amount"`
	At        time.Time `json:"at"`
}

// PaymentFailed ends the payment in progress without money; the order is editable again.
type PaymentFailed struct {
	PaymentID string    `json:"paymentId"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// Cancelled ends an unpaid order.
type Cancelled struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Shipped records that the order left with a carrier.
type Shipped struct {
	Carrier        string    `json:"carrier"`
	TrackingNumber string    `json:"trackingNumber"`
	At             time.Time `json:"at"`
}

// RefundRequested starts refunding Amount of the order's payment.
type RefundRequested struct {
	RefundID string    `json:"refundId"`
	Amount   Money     `json:"amount"`
	At       time.Time `json:"at"`
}

// RefundCompleted records that the refund was paid out. It repeats the amount so that the
// refunded total can be summed from these events alone.
type RefundCompleted struct {
	RefundID string    `json:"refundId"`
	Amount   Money     `json:"amount"`
	At       time.Time `json:"at"`
}

// DuplicateChargeRecorded records money the provider captured for this order that the order
// did not accept as its payment: a second payment for a paid order (the double charge of
// seed 001), a payment other than the one in progress, one for the wrong amount, or one that
// arrived when no payment was awaited. The money is the customer's and must be returned; this
// event is what refunds and audits work from. It does not change the order's status.
type DuplicateChargeRecorded struct {
	PaymentID string       `json:"paymentId"`
	Amount    Money        `json:"amount"`
	Reason    ChargeReason `json:"reason"`
	At        time.Time    `json:"at"`
}

// ProviderEventUnapplied records a payment provider's event that the order could not take: a
// failure reported for a payment that is not in progress, a refund the order does not allow.
// The order is otherwise unchanged; the event tells an auditor what the provider said and why
// it was not applied, and the provider, answered, stops reporting it.
type ProviderEventUnapplied struct {
	Provider string    `json:"provider"`
	EventID  string    `json:"eventId"`   // the provider's
	Type     string    `json:"eventType"` // the provider's event type
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// ChargeReason says why a charge was not accepted as the order's payment.
type ChargeReason string

// Stored in events: never change the strings.
const (
	ChargeAlreadyPaid        ChargeReason = "already-paid"         // another payment was confirmed before
	ChargePaymentMismatch    ChargeReason = "payment-id-mismatch"  // not the payment in progress
	ChargeAmountMismatch     ChargeReason = "amount-mismatch"      // the payment in progress, for a wrong amount
	ChargeNotAwaitingPayment ChargeReason = "not-awaiting-payment" // order created (no payment started) or cancelled
)

func (Created) EventType() string                 { return "order.created.v2" }
func (LineAdded) EventType() string               { return "order.line-added.v2" }
func (LineQuantityChanged) EventType() string     { return "order.line-quantity-changed.v1" }
func (LineRemoved) EventType() string             { return "order.line-removed.v1" }
func (PaymentStarted) EventType() string          { return "order.payment-started.v1" }
func (PaymentConfirmed) EventType() string        { return "order.payment-confirmed.v1" }
func (PaymentFailed) EventType() string           { return "order.payment-failed.v1" }
func (Cancelled) EventType() string               { return "order.cancelled.v1" }
func (Shipped) EventType() string                 { return "order.shipped.v1" }
func (RefundRequested) EventType() string         { return "order.refund-requested.v1" }
func (RefundCompleted) EventType() string         { return "order.refund-completed.v1" }
func (DuplicateChargeRecorded) EventType() string { return "order.duplicate-charge-recorded.v1" }
func (ProviderEventUnapplied) EventType() string  { return "order.provider-event-unapplied.v1" }

func (e Created) occurredAt() time.Time                 { return e.At }
func (e LineAdded) occurredAt() time.Time               { return e.At }
func (e LineQuantityChanged) occurredAt() time.Time     { return e.At }
func (e LineRemoved) occurredAt() time.Time             { return e.At }
func (e PaymentStarted) occurredAt() time.Time          { return e.At }
func (e PaymentConfirmed) occurredAt() time.Time        { return e.At }
func (e PaymentFailed) occurredAt() time.Time           { return e.At }
func (e Cancelled) occurredAt() time.Time               { return e.At }
func (e Shipped) occurredAt() time.Time                 { return e.At }
func (e RefundRequested) occurredAt() time.Time         { return e.At }
func (e RefundCompleted) occurredAt() time.Time         { return e.At }
func (e DuplicateChargeRecorded) occurredAt() time.Time { return e.At }
func (e ProviderEventUnapplied) occurredAt() time.Time  { return e.At }
