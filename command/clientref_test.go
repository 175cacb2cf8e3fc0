package command_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
)

func withRef(id, customer, ref string) order.CreateOrder {
	c := create(id)
	c.CustomerID, c.ClientRef = customer, ref
	return c
}

func as(principal, key string) command.Metadata {
	md := keyed(key, "fp-"+key)
	md.Principal = principal
	return md
}

// Two clients name their own customers: the same customer id and reference from each is two
// claims, and neither learns of the other's order.
func TestClientReferenceIsPerPrincipal(t *testing.T) {
	h, _ := newHandler(t)
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", withRef("o1", "c-1", "po-1"), as("alice", "k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, "o2", withRef("o2", "c-1", "po-1"), as("bob", "k1")); err != nil {
		t.Fatalf("bob's order with alice's customer id and reference: %v", err)
	}
	for _, p := range []string{"alice", "bob"} {
		if _, err := h.Handle(ctx, "o3", withRef("o3", "c-1", "po-1"), as(p, "k2")); !errors.Is(err, command.ErrClientRefTaken) {
			t.Errorf("%s's second order with the reference: %v; want ErrClientRefTaken", p, err)
		}
	}
}
