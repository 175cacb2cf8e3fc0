package api

import (
	"bytes"
	"fmt"

	"github.com/acme/orders/domain/order"
	"github.com/labstack/echo/v4"
)

// Request bodies. Pointers mark required fields, so a missing one is told from a zero one.
type (
	lineBody struct {
		SKU       *string `json:"sku"`
		Name      string  `json:"name"`
		Quantity  *int64  `json:"quantity"`
		UnitPrice *int64  `json:"unitPrice"`
	}
	createBody struct {
		CustomerID      *string    `json:"customerId"`
		Currency        *string    `json:"currency"`
		Lines           []lineBody `json:"lines"`
		ClientReference string     `json:"clientReference"`
		Channel         string     `json:"channel"`
	}
	quantityBody struct {
		Quantity *int64 `json:"quantity"`
	}
	paymentBody struct {
		PaymentID *string `json:"paymentId"`
		Amount    *int64  `json:"amount"`
	}
	amountBody struct {
		Amount *int64 `json:"amount"`
	}
	reasonBody struct {
		Reason *string `json:"reason"`
	}
	shipmentBody struct {
		Carrier        *string `json:"carrier"`
		TrackingNumber *string `json:"trackingNumber"`
	}
	refundBody struct {
		RefundID *string `json:"refundId"`
		Amount   *int64  `json:"amount"`
	}
)

func (l lineBody) check() error {
	return required(map[string]bool{"sku": l.SKU != nil, "quantity": l.Quantity != nil, "unitPrice": l.UnitPrice != nil})
}

// money is an amount in the order's currency. Commands on an existing order do not name the
// currency: the order knows it, and the domain compares amounts only within it.
func money(amount int64, currency string) order.Money {
	return order.Money{Amount: amount, Currency: order.Currency(currency)}
}

// sameCurrency marks amounts whose currency the order supplies (see order.Money).
const sameCurrency = ""

var createOrder = route{name: order.CreateOrder{}.CommandName(), create: true, parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b createBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"customerId": b.CustomerID != nil, "currency": b.Currency != nil}); err != nil {
		return nil, err
	}
	// The contract's maxItems, checked before the body is fingerprinted, which costs far more
	// than the body itself for many small lines.
	if len(b.Lines) > order.MaxLines {
		return nil, fmt.Errorf("%w: %d lines, more than the %d an order can have", errMalformed, len(b.Lines), order.MaxLines)
	}
	lines := make([]order.AddLine, len(b.Lines))
	for i, l := range b.Lines {
		if err := l.check(); err != nil {
			return nil, err
		}
		lines[i] = order.AddLine{SKU: *l.SKU, Name: l.Name, Quantity: *l.Quantity, UnitPrice: money(*l.UnitPrice, *b.Currency)}
	}
	// The order's id is the one its key is claimed with (command.Handler.Plan sets it).
	return order.CreateOrder{CustomerID: *b.CustomerID, Currency: order.Currency(*b.Currency), Lines: lines, ClientRef: b.ClientReference,
		Channel: b.Channel}, nil
}}

var addLine = route{name: order.AddLine{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b lineBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return order.AddLine{SKU: *b.SKU, Name: b.Name, Quantity: *b.Quantity, UnitPrice: money(*b.UnitPrice, sameCurrency)}, nil
}}

var changeLine = route{name: order.ChangeLineQuantity{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b quantityBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"quantity": b.Quantity != nil}); err != nil {
		return nil, err
	}
	sku, err := pathValue(c, "sku")
	if err != nil {
		return nil, err
	}
	return order.ChangeLineQuantity{SKU: sku, Quantity: *b.Quantity}, nil
}}

var removeLine = route{name: order.RemoveLine{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	sku, err := pathValue(c, "sku")
	if err != nil {
		return nil, err
	}
	return order.RemoveLine{SKU: sku}, nil
}}

var startPayment = route{name: order.StartPayment{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b paymentBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"paymentId": b.PaymentID != nil, "amount": b.Amount != nil}); err != nil {
		return nil, err
	}
	return order.StartPayment{PaymentID: *b.PaymentID, Amount: money(*b.Amount, sameCurrency)}, nil
}}

var confirmPayment = route{name: order.ConfirmPayment{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b amountBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"amount": b.Amount != nil}); err != nil {
		return nil, err
	}
	paymentID, err := pathValue(c, "paymentId")
	if err != nil {
		return nil, err
	}
	return order.ConfirmPayment{PaymentID: paymentID, Amount: money(*b.Amount, sameCurrency)}, nil
}}

// confirmPaymentByID is the callback of a provider that knows only its payment id.
var confirmPaymentByID = route{name: confirmPayment.name, lookup: paymentOrder, parse: confirmPayment.parse}

var failPayment = route{name: order.FailPayment{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b reasonBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"reason": b.Reason != nil}); err != nil {
		return nil, err
	}
	paymentID, err := pathValue(c, "paymentId")
	if err != nil {
		return nil, err
	}
	return order.FailPayment{PaymentID: paymentID, Reason: *b.Reason}, nil
}}

var cancelOrder = route{name: order.Cancel{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b reasonBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"reason": b.Reason != nil}); err != nil {
		return nil, err
	}
	return order.Cancel{Reason: *b.Reason}, nil
}}

var ship = route{name: order.Ship{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b shipmentBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"carrier": b.Carrier != nil, "trackingNumber": b.TrackingNumber != nil}); err != nil {
		return nil, err
	}
	return order.Ship{Carrier: *b.Carrier, TrackingNumber: *b.TrackingNumber}, nil
}}

var requestRefund = route{name: order.RequestRefund{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	var b refundBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if err := required(map[string]bool{"refundId": b.RefundID != nil, "amount": b.Amount != nil}); err != nil {
		return nil, err
	}
	return order.RequestRefund{RefundID: *b.RefundID, Amount: money(*b.Amount, sameCurrency)}, nil
}}

var completeRefund = route{name: order.CompleteRefund{}.CommandName(), parse: func(c echo.Context, body []byte) (order.Command, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	refundID, err := pathValue(c, "refundId")
	if err != nil {
		return nil, err
	}
	return order.CompleteRefund{RefundID: refundID}, nil
}}

// noBody accepts an empty body or an empty JSON object, for commands whose path says it all.
func noBody(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var b struct{}
	return decode(body, &b)
}
