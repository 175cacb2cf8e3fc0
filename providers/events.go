package providers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/fault"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Kind is what an event reports, in the service's terms.
type Kind string

// The kinds of event.
const (
	PaymentSucceeded Kind = "payment-succeeded"
	PaymentFailed    Kind = "payment-failed"
	RefundSucceeded  Kind = "refund-succeeded"
	Unmapped         Kind = "unmapped" // a type the service does not act on
)

// Event is what a verified delivery reports.
type Event struct {
	ID        string // the provider's event id: Standard Webhooks' webhook-id header, Stripe's body "id"
	Type      string // the provider's event type, as sent
	Kind      Kind
	PaymentID string
	OrderID   string // from the provider's metadata; "" if absent
	RefundID  string
	Amount    order.Money // minor units, currency upper-cased; zero for a failure
	Reason    string      // a failure's message
}

// ErrMalformed is the error of a verified delivery that Read cannot read.
var ErrMalformed = fault.New(fault.Invalid, "provider-event-malformed", "the delivery is not an event of its provider's scheme")

// defaultFailure is the Reason of a failure that gives none.
const defaultFailure = "payment failed"

// The event types of the Standard Webhooks scheme: the service's own payload (see doc.go).
const (
	typePaymentSucceeded = "payment.succeeded"
	typePaymentFailed    = "payment.failed"
	typeRefundSucceeded  = "refund.succeeded"
)

// The Stripe event types that Read maps.
const (
	stripePaymentSucceeded = "payment_intent.succeeded"
	stripePaymentFailed    = "payment_intent.payment_failed"
	stripeRefundUpdated    = "refund.updated"
	stripeChargeRefunded   = "charge.refunded"
)

// standardKinds are the kinds of the Standard Webhooks types; any other is Unmapped.
var standardKinds = map[string]Kind{
	typePaymentSucceeded: PaymentSucceeded,
	typePaymentFailed:    PaymentFailed,
	typeRefundSucceeded:  RefundSucceeded,
}

// defaultTypes are the types Body gives an event of a kind but no type.
var defaultTypes = map[Scheme]map[Kind]string{
	StandardWebhooks: {PaymentSucceeded: typePaymentSucceeded, PaymentFailed: typePaymentFailed, RefundSucceeded: typeRefundSucceeded},
	Stripe:           {PaymentSucceeded: stripePaymentSucceeded, PaymentFailed: stripePaymentFailed, RefundSucceeded: stripeRefundUpdated},
}

// Read reads a verified delivery's event; call it after Verify. An event of a type the
// service does not act on is no error: it has Kind Unmapped, with its ID and Type. A body
// that is not an event of p's scheme, or a mapped event without the fields its kind needs,
// is an error wrapping ErrMalformed.
func (p Provider) Read(h http.Header, body []byte) (Event, error) {
	switch p.Scheme {
	case StandardWebhooks:
		return readStandard(h, body)
	case Stripe:
		return readStripe(body)
	}
	return Event{}, fmt.Errorf("%w: unknown scheme %q", ErrMalformed, p.Scheme)
}

// Body returns the JSON body of e in p's scheme, sent at at: the inverse of Read. Its type is
// e.Type, or the scheme's type for e.Kind if e.Type is "". It does not check that e has the
// fields its kind needs: Read does. For the command line and tests.
func (p Provider) Body(e Event, at time.Time) ([]byte, error) {
	typ := cmp.Or(e.Type, defaultTypes[p.Scheme][e.Kind])
	if typ == "" {
		return nil, fmt.Errorf("an event of kind %q has no type of scheme %q; give its type", e.Kind, p.Scheme)
	}
	switch p.Scheme {
	case StandardWebhooks:
		return standardBody(typ, e, at)
	case Stripe:
		return stripeBody(typ, e, at)
	}
	return nil, fmt.Errorf("unknown scheme %q", p.Scheme)
}

// check checks that e has the fields its kind needs.
func (e Event) check() error {
	if e.Kind == Unmapped {
		return nil
	}
	if e.PaymentID == "" {
		return fmt.Errorf("%w: %s without a payment id", ErrMalformed, e.Type)
	}
	if e.Kind == PaymentFailed {
		return nil
	}
	if e.Kind == RefundSucceeded && e.RefundID == "" {
		return fmt.Errorf("%w: %s without a refund id", ErrMalformed, e.Type)
	}
	if e.Amount.Amount <= 0 {
		return fmt.Errorf("%w: %s without a positive amount", ErrMalformed, e.Type)
	}
	if !e.Amount.Currency.Valid() {
		return fmt.Errorf("%w: %s: currency %q is not an ISO 4217 code", ErrMalformed, e.Type, e.Amount.Currency)
	}
	return nil
}

// money is an amount of minor units in a currency as a provider writes it, in either case.
func money(amount int64, currency string) order.Money {
	return order.Money{Amount: amount, Currency: order.Currency(strings.ToUpper(currency))}
}

// standardPayload is the body of a Standard Webhooks delivery, whose data is the service's
// own format (see doc.go).
type standardPayload struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"` // read only for the types Read maps
}

type standardData struct {
	PaymentID string `json:"paymentId,omitempty"`
	OrderID   string `json:"orderId,omitempty"`
	RefundID  string `json:"refundId,omitempty"`
	Amount    int64  `json:"amount,omitempty"`
	Currency  string `json:"currency,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func readStandard(h http.Header, body []byte) (Event, error) {
	var pl standardPayload
	if err := json.Unmarshal(body, &pl); err != nil {
		return Event{}, fmt.Errorf("%w: not a JSON object: %v", ErrMalformed, err)
	}
	e := Event{ID: h.Get(standardwebhooks.HeaderWebhookID), Type: pl.Type, Kind: Unmapped}
	switch {
	case e.ID == "":
		return Event{}, fmt.Errorf("%w: no %s header", ErrMalformed, standardwebhooks.HeaderWebhookID)
	case e.Type == "":
		return Event{}, fmt.Errorf("%w: no type", ErrMalformed)
	}
	kind, ok := standardKinds[e.Type]
	if !ok {
		return e, nil
	}
	var d standardData
	if err := json.Unmarshal(pl.Data, &d); err != nil {
		return Event{}, fmt.Errorf("%w: %s: data: %v", ErrMalformed, e.Type, err)
	}
	e.Kind, e.PaymentID, e.OrderID, e.RefundID = kind, d.PaymentID, d.OrderID, d.RefundID
	if kind == PaymentFailed {
		e.Reason = cmp.Or(d.Reason, defaultFailure)
	} else {
		e.Amount = money(d.Amount, d.Currency)
	}
	if kind != RefundSucceeded {
		e.RefundID = ""
	}
	if err := e.check(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func standardBody(typ string, e Event, at time.Time) ([]byte, error) {
	data, err := json.Marshal(standardData{
		PaymentID: e.PaymentID, OrderID: e.OrderID, RefundID: e.RefundID,
		Amount: e.Amount.Amount, Currency: string(e.Amount.Currency), Reason: e.Reason,
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(standardPayload{Type: typ, Timestamp: at.UTC().Format(time.RFC3339), Data: data})
}

// stripeEvent is a Stripe event object, of which Read needs only these fields.
type stripeEvent struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"` // read only for the types Read maps
	} `json:"data"`
}

// stripeObject is what Read needs of the objects of the mapped events: payment intents,
// refunds and charges. Amounts are in minor units; currencies lower-case.
type stripeObject struct {
	ID               string            `json:"id"`
	Object           string            `json:"object,omitempty"`
	Amount           int64             `json:"amount,omitempty"`
	AmountReceived   int64             `json:"amount_received,omitempty"`
	AmountRefunded   int64             `json:"amount_refunded,omitempty"`
	Currency         string            `json:"currency,omitempty"`
	Status           string            `json:"status,omitempty"`
	PaymentIntent    string            `json:"payment_intent,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	LastPaymentError *stripeError      `json:"last_payment_error,omitempty"`
	Refunds          *stripeList       `json:"refunds,omitempty"` // a charge's, newest first
}

type stripeError struct {
	Message string `json:"message"`
}

type stripeList struct {
	Object string         `json:"object"`
	Data   []stripeObject `json:"data"`
}

// orderID is the order id in a Stripe object's metadata.
func (o stripeObject) orderID() string {
	return cmp.Or(o.Metadata["order_id"], o.Metadata["orderId"])
}

func readStripe(body []byte) (Event, error) {
	var ev stripeEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, fmt.Errorf("%w: not a JSON object: %v", ErrMalformed, err)
	}
	e := Event{ID: ev.ID, Type: ev.Type, Kind: Unmapped}
	switch {
	case ev.Object != "" && ev.Object != "event":
		return Event{}, fmt.Errorf("%w: an object %q, not an event", ErrMalformed, ev.Object)
	case e.ID == "":
		return Event{}, fmt.Errorf("%w: no id", ErrMalformed)
	case e.Type == "":
		return Event{}, fmt.Errorf("%w: no type", ErrMalformed)
	}
	switch e.Type {
	case stripePaymentSucceeded, stripePaymentFailed, stripeRefundUpdated, stripeChargeRefunded:
	default:
		return e, nil
	}
	var o stripeObject
	if err := json.Unmarshal(ev.Data.Object, &o); err != nil {
		return Event{}, fmt.Errorf("%w: %s: data.object: %v", ErrMalformed, e.Type, err)
	}
	e = readStripeObject(e, o)
	if err := e.check(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// readStripeObject fills e from the object of a mapped Stripe event.
func readStripeObject(e Event, o stripeObject) Event {
	e.OrderID = o.orderID()
	switch e.Type {
	case stripePaymentSucceeded:
		e.Kind, e.PaymentID = PaymentSucceeded, o.ID
		e.Amount = money(cmp.Or(o.AmountReceived, o.Amount), o.Currency)
	case stripePaymentFailed:
		e.Kind, e.PaymentID, e.Reason = PaymentFailed, o.ID, defaultFailure
		if o.LastPaymentError != nil {
			e.Reason = cmp.Or(o.LastPaymentError.Message, defaultFailure)
		}
	case stripeRefundUpdated:
		if o.Status != "succeeded" {
			return Event{ID: e.ID, Type: e.Type, Kind: Unmapped} // no completed refund yet
		}
		e.Kind, e.RefundID, e.PaymentID = RefundSucceeded, o.ID, o.PaymentIntent
		e.Amount = money(o.Amount, o.Currency)
	case stripeChargeRefunded:
		e.Kind, e.RefundID, e.PaymentID = RefundSucceeded, o.ID, o.PaymentIntent
		e.Amount = money(o.AmountRefunded, o.Currency)
		// The newest refund, when the charge lists it, names this refund and its own amount:
		// amount_refunded is the total of all the charge's refunds.
		if o.Refunds != nil && len(o.Refunds.Data) > 0 {
			r := o.Refunds.Data[0]
			if r.Status != "" && r.Status != "succeeded" {
				return Event{ID: e.ID, Type: e.Type, Kind: Unmapped} // refund.updated tells when it is
			}
			e.RefundID = r.ID
			e.OrderID = cmp.Or(e.OrderID, r.orderID())
			e.Amount = money(cmp.Or(r.Amount, o.AmountRefunded), cmp.Or(r.Currency, o.Currency))
		}
	}
	return e
}

func stripeBody(typ string, e Event, at time.Time) ([]byte, error) {
	if e.ID == "" {
		return nil, errors.New("a Stripe event needs an id (evt_…)")
	}
	obj, err := json.Marshal(stripeObjectOf(typ, e))
	if err != nil {
		return nil, err
	}
	ev := stripeEvent{ID: e.ID, Object: "event", Type: typ, Created: at.Unix()}
	ev.Data.Object = obj
	return json.Marshal(ev)
}

// stripeObjectOf is the object of a Stripe event of type typ reporting e: the fields Read
// reads, and the few that tell a reader what the object is.
func stripeObjectOf(typ string, e Event) stripeObject {
	cur := strings.ToLower(string(e.Amount.Currency))
	var md map[string]string
	if e.OrderID != "" {
		md = map[string]string{"order_id": e.OrderID}
	}
	switch {
	case typ == stripeChargeRefunded:
		return stripeCharge(e, cur, md)
	case strings.HasPrefix(typ, "refund."):
		return stripeObject{ID: e.RefundID, Object: "refund", Amount: e.Amount.Amount, Currency: cur,
			Status: "succeeded", PaymentIntent: e.PaymentID, Metadata: md}
	case strings.HasPrefix(typ, "payment_intent."):
		o := stripeObject{ID: e.PaymentID, Object: "payment_intent", Amount: e.Amount.Amount, Currency: cur, Metadata: md}
		switch typ {
		case stripePaymentSucceeded:
			o.Status, o.AmountReceived = "succeeded", e.Amount.Amount
		case stripePaymentFailed:
			o.Status = "requires_payment_method"
			if e.Reason != "" {
				o.LastPaymentError = &stripeError{Message: e.Reason}
			}
		}
		return o
	}
	return stripeObject{ID: cmp.Or(e.PaymentID, e.RefundID), Metadata: md}
}

// stripeCharge is the charge of a charge.refunded event reporting e. A refund id of a charge
// (ch_…) stands for a charge that lists no refunds, as charges of recent API versions do.
func stripeCharge(e Event, cur string, md map[string]string) stripeObject {
	c := stripeObject{Object: "charge", Amount: e.Amount.Amount, AmountRefunded: e.Amount.Amount,
		Currency: cur, Status: "succeeded", PaymentIntent: e.PaymentID, Metadata: md}
	if strings.HasPrefix(e.RefundID, "ch_") {
		c.ID = e.RefundID
		return c
	}
	c.ID = "ch_" + strings.TrimPrefix(e.PaymentID, "pi_")
	c.Refunds = &stripeList{Object: "list", Data: []stripeObject{{ID: e.RefundID, Object: "refund",
		Amount: e.Amount.Amount, Currency: cur, Status: "succeeded", PaymentIntent: e.PaymentID}}}
	return c
}
