package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/acme/orders/client"
)

// The examples with an Output comment run against the real service, which TestMain started in
// development mode at client.ServiceURL; a program passes its own URL, such as
// "http://127.0.0.1:8080", and client.WithAPIKey.

func ExampleClient_CreateOrder() {
	c := client.New(client.ServiceURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	order, meta, err := c.CreateOrder(ctx, client.CreateOrderRequest{
		CustomerID: "c-create",
		Currency:   "EUR",
		Lines:      []client.LineInput{{SKU: "book", Name: "The Go Programming Language", Quantity: 2, UnitPrice: 1250}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// However many attempts it took, the service created one order.
	fmt.Println(order.Status, order.Total, meta.Replayed)
	// Output: created 2500 false
}

func ExampleWithIdempotencyKey() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	req := client.CreateOrderRequest{CustomerID: "c-key", Currency: "EUR"}
	first, meta, err := c.CreateOrder(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	// The process restarted, say, and does not know whether its call was carried out: sending
	// it again with the same key replays the first outcome instead of creating a second order.
	again, meta, err := c.CreateOrder(ctx, req, client.WithIdempotencyKey(meta.IdempotencyKey))
	fmt.Println(again.ID == first.ID, meta.Replayed, err)
	// A key names one request: with another body it is refused.
	req.Currency = "USD"
	_, _, err = c.CreateOrder(ctx, req, client.WithIdempotencyKey(meta.IdempotencyKey))
	fmt.Println(errors.Is(err, client.ErrKeyReused))
	// Output:
	// true true <nil>
	// true
}

func ExampleClient_StartPayment() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	order, meta, err := c.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-pay", Currency: "EUR",
		Lines: []client.LineInput{{SKU: "mug", Quantity: 1, UnitPrice: 900}}})
	if err != nil {
		log.Fatal(err)
	}
	order, _, err = c.GetOrder(ctx, order.ID, client.WithMinPosition(meta.LogPosition))
	if err != nil {
		log.Fatal(err)
	}
	// Pay the order as it was read: a change in between answers 412.
	order, _, err = c.StartPayment(ctx, order.ID,
		client.StartPaymentRequest{PaymentID: "pay-example", Amount: order.Total}, client.WithIfMatch(order.Version))
	if err != nil {
		log.Fatal(err)
	}
	order, meta, err = c.ConfirmPayment(ctx, order.ID, "pay-example", order.Total)
	if err != nil {
		log.Fatal(err)
	}
	// Read the payment's effect from the read model, on any node.
	order, _, err = c.GetOrder(ctx, order.ID, client.WithMinPosition(meta.LogPosition))
	fmt.Println(order.Status, order.Paid, err)
	// Output: paid 900 <nil>
}

func ExampleProblem() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	order, _, err := c.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-problem", Currency: "EUR",
		Lines: []client.LineInput{{SKU: "mug", Quantity: 1, UnitPrice: 900}}})
	if err != nil {
		log.Fatal(err)
	}
	_, _, err = c.Ship(ctx, order.ID, client.ShipRequest{Carrier: "DHL", TrackingNumber: "JJD000390007712345"})
	var p *client.Problem
	switch {
	case err == nil:
		fmt.Println("shipped")
	case errors.Is(err, client.ErrNotFound):
		fmt.Println("no such order")
	case errors.Is(err, client.ErrRejected):
		fmt.Println("the order cannot be shipped now") // not paid yet, as here
	case errors.As(err, &p):
		fmt.Println(p.Status, p.Code, p.Detail, p.RequestID)
	default:
		fmt.Println("no answer:", err) // after every attempt: the network, or the context's deadline
	}
	// Output: the order cannot be shipped now
}

func ExampleClient_ChangeLineQuantity() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	order, _, err := c.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-lines", Currency: "EUR",
		Lines: []client.LineInput{{SKU: "mug", Quantity: 1, UnitPrice: 900}, {SKU: "tea/green", Quantity: 1, UnitPrice: 450}}})
	if err != nil {
		log.Fatal(err)
	}
	order, _, err = c.ChangeLineQuantity(ctx, order.ID, "mug", 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(order.Lines), order.Total)
	order, _, err = c.RemoveLine(ctx, order.ID, "tea/green") // a SKU is escaped as one path segment
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(order.Lines), order.Total)
	// Output:
	// 2 3150
	// 1 2700
}

func ExampleClient_Events() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	order, _, err := c.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-events", Currency: "EUR",
		Lines: []client.LineInput{{SKU: "mug", Quantity: 1, UnitPrice: 900}}})
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.StartPayment(ctx, order.ID, client.StartPaymentRequest{PaymentID: "pay-events", Amount: 900}); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.FailPayment(ctx, order.ID, "pay-events", "card declined"); err != nil {
		log.Fatal(err)
	}
	for e, err := range c.Events(ctx, order.ID) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Revision, e.Type, e.Metadata.IdempotencyKey != "")
	}
	// Output:
	// 0 order.created.v2 true
	// 1 order.line-added.v2 true
	// 2 order.payment-started.v1 true
	// 3 order.payment-failed.v1 true
}

func ExampleClient_ConfirmPaymentByID() {
	c := client.New(client.ServiceURL)
	ctx := context.Background()
	order, _, err := c.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-by-id", Currency: "EUR",
		Lines: []client.LineInput{{SKU: "mug", Quantity: 2, UnitPrice: 900}}})
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.StartPayment(ctx, order.ID, client.StartPaymentRequest{PaymentID: "pay-by-id", Amount: 1800}); err != nil {
		log.Fatal(err)
	}
	// The provider's callback knows its payment id, not the order's.
	paid, _, err := c.ConfirmPaymentByID(ctx, "pay-by-id", 1800)
	fmt.Println(paid.ID == order.ID, paid.Status, err)
	// Output: true paid <nil>
}

func ExampleClient_ListOrders() {
	c := client.New("http://127.0.0.1:8080")
	for order, err := range c.ListOrders(context.Background(), client.ListOptions{Status: client.StatusPaid}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(order.ID, order.CustomerID, order.Total)
	}
}

func ExampleClient_Session() {
	s := client.New(client.ServiceURL).Session()
	ctx := context.Background()
	order, _, err := s.CreateOrder(ctx, client.CreateOrderRequest{CustomerID: "c-session", Currency: "EUR"})
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err = s.AddLine(ctx, order.ID, client.LineInput{SKU: "mug", Quantity: 1, UnitPrice: 900}); err != nil {
		log.Fatal(err)
	}
	// The session's reads wait for its own writes.
	for o, err := range s.ListOrders(ctx, client.ListOptions{CustomerID: "c-session"}) {
		fmt.Println(o.Version, o.Total, err)
	}
	// Output: 2 900 <nil>
}

func ExampleClient_Deliveries() {
	c := client.New("http://127.0.0.1:8080")
	for d, err := range c.Deliveries(context.Background(), "we_k5q2yq3d7n4xw2c6r5m7t3v2zq") {
		if err != nil {
			log.Fatal(err)
		}
		// Dead letters: fix the receiver, then have the service send them again.
		fmt.Println(d.ID, d.Type, d.OrderID, d.Tries, d.DeadLetteredAt)
	}
}

func ExampleHandler() {
	secret := "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // shown once when the endpoint was registered
	http.Handle("/hooks/orders", client.Handler(secret, func(d client.Delivery) error {
		// A delivery may come more than once: process each d.ID once.
		fmt.Println(d.ID, d.Payload.Type, d.Payload.Data.Order.Status)
		return nil
	}))
}
