package webhooks

import (
	"slices"
	"time"

	"github.com/acme/orders/domain/order"
)

// eventTypes maps each order event's type, without its version, to the webhook event type a
// client subscribes to: an event stored at an earlier version is delivered upcast, under the
// same name as the current one.
var eventTypes = map[string]string{
	order.Unversioned(order.Created{}.EventType()):                 "order.created",
	order.Unversioned(order.LineAdded{}.EventType()):               "order.line-added",
	order.Unversioned(order.LineQuantityChanged{}.EventType()):     "order.line-quantity-changed",
	order.Unversioned(order.LineRemoved{}.EventType()):             "order.line-removed",
	order.Unversioned(order.PaymentStarted{}.EventType()):          "order.payment-started",
	order.Unversioned(order.PaymentConfirmed{}.EventType()):        "order.paid",
	order.Unversioned(order.PaymentFailed{}.EventType()):           "order.payment-failed",
	order.Unversioned(order.Cancelled{}.EventType()):               "order.cancelled",
	order.Unversioned(order.Shipped{}.EventType()):                 "order.shipped",
	order.Unversioned(order.RefundRequested{}.EventType()):         "order.refund-requested",
	order.Unversioned(order.RefundCompleted{}.EventType()):         "order.refunded",
	order.Unversioned(order.DuplicateChargeRecorded{}.EventType()): "order.duplicate-charge-recorded",
	order.Unversioned(order.ProviderEventUnapplied{}.EventType()):  "order.provider-event-unapplied",
}

// AllEvents subscribes an endpoint to every event type.
const AllEvents = "*"

// EventTypes returns the webhook event types, sorted.
func EventTypes() []string {
	var ts []string
	for _, t := range eventTypes {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// knownType reports whether t is a webhook event type or AllEvents.
func knownType(t string) bool {
	if t == AllEvents {
		return true
	}
	for _, k := range eventTypes {
		if k == t {
			return true
		}
	}
	return false
}

// Payload is the body of a delivery.
type Payload struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"createdAt"`
	OrderID   string    `json:"orderId"`
	Revision  uint64    `json:"revision"`
	Data      struct {
		Event any       `json:"event"`
		Order OrderView `json:"order"`
	} `json:"data"`
}

// OrderView is an order's state after the event, as a delivery carries it.
type OrderView struct {
	ID                   string     `json:"id"`
	CustomerID           string     `json:"customerId"`
	Currency             string     `json:"currency"`
	ClientReference      string     `json:"clientReference,omitempty"`
	Channel              string     `json:"channel"`
	Status               string     `json:"status"`
	Lines                []LineView `json:"lines"`
	Total                int64      `json:"total"`
	Paid                 int64      `json:"paid"`
	Refunded             int64      `json:"refunded"`
	PaymentID            string     `json:"paymentId,omitempty"`
	RefundID             string     `json:"refundId,omitempty"`
	Carrier              string     `json:"carrier,omitempty"`
	TrackingNumber       string     `json:"trackingNumber,omitempty"`
	DuplicateChargeCount int        `json:"duplicateChargeCount"`
	Version              int64      `json:"version"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
}

// LineView is a line of an OrderView.
type LineView struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
}

func viewOf(s order.State) OrderView {
	v := OrderView{
		ID: s.ID, CustomerID: s.CustomerID, Currency: string(s.Currency), ClientReference: s.ClientRef, Channel: s.Channel,
		Status: s.Status.String(), Lines: []LineView{}, Total: s.Total.Amount, Paid: s.Paid.Amount,
		Refunded: s.Refunded.Amount, PaymentID: s.PaymentID, RefundID: s.RefundID, Carrier: s.Carrier,
		TrackingNumber: s.TrackingNumber, DuplicateChargeCount: s.DuplicateCharges.Len(), Version: s.Version,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	for _, l := range s.Lines {
		v.Lines = append(v.Lines, LineView{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, UnitPrice: l.UnitPrice.Amount})
	}
	return v
}
