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

func ExampleClient_CreateOrder() {
	c := client.New("http://127.0.0.1:8080", client.WithAPIKey("s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	order, meta, err := c.CreateOrder(ctx, client.CreateOrderRequest{
		CustomerID: "c-42",
		Currency:   "EUR",
		Lines:      []client.LineInput{{SKU: "book", Name: "The Go Programming Language", Quantity: 2, UnitPrice: 1250}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// However many attempts it took, the service created one order.
	fmt.Println(order.ID, order.Total, meta.Attempts, meta.Replayed)
}

func ExampleClient_StartPayment() {
	c := client.New("http://127.0.0.1:8080")
	ctx := context.Background()
	order, _, err := c.GetOrder(ctx, "01JD3Z8Q7T5V9W2X4Y6Z8A0B1C")
	if err != nil {
		log.Fatal(err)
	}
	// Pay the order as it was read: a change in between answers 412.
	order, meta, err := c.StartPayment(ctx, order.ID,
		client.StartPaymentRequest{PaymentID: "pay-7", Amount: order.Total}, client.WithIfMatch(order.Version))
	if err != nil {
		log.Fatal(err)
	}
	order, meta, err = c.ConfirmPayment(ctx, order.ID, "pay-7", order.Total)
	if err != nil {
		log.Fatal(err)
	}
	// Read the payment's effect from the read model, on any node.
	order, _, err = c.GetOrder(ctx, order.ID, client.WithMinPosition(meta.LogPosition))
	fmt.Println(order.Status, err)
}

func ExampleProblem() {
	c := client.New("http://127.0.0.1:8080")
	_, _, err := c.Ship(context.Background(), "01JD3Z8Q7T5V9W2X4Y6Z8A0B1C",
		client.ShipRequest{Carrier: "DHL", TrackingNumber: "JJD000390007712345"})
	var p *client.Problem
	switch {
	case err == nil:
		fmt.Println("shipped")
	case errors.Is(err, client.ErrNotFound):
		fmt.Println("no such order")
	case errors.Is(err, client.ErrRejected):
		fmt.Println("the order cannot be shipped now") // not paid yet, say
	case errors.As(err, &p):
		fmt.Println(p.Status, p.Code, p.Detail, p.RequestID)
	default:
		fmt.Println("no answer:", err) // after every attempt: the network, or the context's deadline
	}
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

func ExampleClient_Events() {
	c := client.New("http://127.0.0.1:8080")
	for e, err := range c.Events(context.Background(), "01JD3Z8Q7T5V9W2X4Y6Z8A0B1C") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Revision, e.Type, e.Metadata.IdempotencyKey)
	}
}

func ExampleClient_Session() {
	s := client.New("http://127.0.0.1:8080").Session()
	ctx := context.Background()
	order, _, err := s.AddLine(ctx, "01JD3Z8Q7T5V9W2X4Y6Z8A0B1C", client.LineInput{SKU: "mug", Quantity: 1, UnitPrice: 900})
	if err != nil {
		log.Fatal(err)
	}
	// The session's reads wait for its own writes.
	for o, err := range s.ListOrders(ctx, client.ListOptions{CustomerID: order.CustomerID}) {
		fmt.Println(o.ID, o.Version, err)
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
