package order

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/fault"
)

// Upcasting: an event type's earlier versions stay readable forever. When a type changes, its
// previous Go type moves here, keeps its name and JSON, and gains an upcast method that returns
// the same fact at the next version. The codec decodes an event stored at version N as the type
// of version N and upcasts it step by step to the current version, so folds, projections,
// audits and the event history all see current events, while the stored bytes (and the hash
// chain over them) never change.
//
// Every earlier version is registered here, in one list; its upcaster states the defaults of
// the fields the next version added, and api/openapi.yaml states them to clients.
var upcasters = []func(map[string]eventType){
	registerEarlier[createdV1],
	registerEarlier[lineAddedV1],
}

// ErrUpcast is returned for a stored event that its upcaster cannot turn into the next version.
var ErrUpcast = fault.New(fault.Unreadable, "", "cannot upcast order event")

// upcaster is an earlier version of an event type.
type upcaster interface {
	EventType() string
	// upcast returns the same fact at the next version: an Event, or another upcaster.
	upcast() (any, error)
}

// maxUpcasts bounds the steps from a stored version to the current one, so that two
// upcasters that point at each other fail instead of looping.
const maxUpcasts = 16

func registerEarlier[U upcaster](types map[string]eventType) {
	var zero U
	types[zero.EventType()] = eventType{decode: func(data []byte) (Event, error) {
		u, err := decodeJSON[U](data)
		if err != nil {
			return nil, err
		}
		return upcast(u)
	}}
}

// upcast applies the upcasters from v's version to the current one.
func upcast(v upcaster) (Event, error) {
	for range maxUpcasts {
		next, err := v.upcast()
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrUpcast, v.EventType(), err)
		}
		switch n := next.(type) {
		case Event:
			return n, nil
		case upcaster:
			v = n
		default:
			return nil, fmt.Errorf("%w %s: upcast to %T, not an event", ErrUpcast, v.EventType(), next)
		}
	}
	return nil, fmt.Errorf("%w %s: more than %d upcasts", ErrUpcast, v.EventType(), maxUpcasts)
}

// createdV1 is Created before orders recorded their sales channel.
type createdV1 struct {
	OrderID    string    `json:"orderId"`
	CustomerID string    `json:"customerId"`
	Currency   Currency  `json:"currency"`
	ClientRef  string    `json:"clientRef"`
	At         time.Time `json:"at"`
}

func (createdV1) EventType() string { return "order.created.v1" }

// upcast gives the order the channel ChannelUnrecorded. An event without an order id founds
// no order: it is refused rather than folded into an order nobody can name.
func (e createdV1) upcast() (any, error) {
	if e.OrderID == "" {
		return nil, errors.New("no orderId")
	}
	return Created{OrderID: e.OrderID, CustomerID: e.CustomerID, Currency: e.Currency, ClientRef: e.ClientRef,
		Channel: ChannelUnrecorded, At: e.At}, nil
}

// lineAddedV1 is LineAdded before lines had a product name.
type lineAddedV1 struct {
	SKU       string    `json:"sku"`
	Quantity  int64     `json:"quantity"`
	UnitPrice Money     `json:"unitPrice"`
	At        time.Time `json:"at"`
}

func (lineAddedV1) EventType() string { return "order.line-added.v1" }

// upcast gives the line no name.
func (e lineAddedV1) upcast() (any, error) {
	return LineAdded{SKU: e.SKU, Quantity: e.Quantity, UnitPrice: e.UnitPrice, At: e.At}, nil
}
