package command_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
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

// Claims made before they were per principal are named by customer and reference alone. After
// the upgrade such a claim still holds for the principal whose order has it, and for no one
// else; a claim whose order never came to be holds for no one.
func TestLegacyClientReferenceClaims(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	legacyClaim := func(customer, ref, orderID string) {
		t.Helper()
		sum := sha256.Sum256([]byte(customer + "\x00" + ref))
		data, _ := json.Marshal(map[string]string{"customerId": customer, "clientReference": ref, "orderId": orderID})
		if _, err := s.Append(ctx, command.ClientRefPrefix+hex.EncodeToString(sum[:]), eventstore.NoStream,
			eventstore.EventData{ID: uuid.New(), Type: command.TypeClientRefClaimed, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	// alice's order o1 from before the upgrade: its claim in the legacy stream.
	legacyClaim("c-1", "po-1", "o1")
	if _, err := h.Handle(ctx, "o1", create("o1"), as("alice", "old")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, "o2", withRef("o2", "c-1", "po-1"), as("alice", "new")); !errors.Is(err, command.ErrClientRefTaken) {
		t.Errorf("alice's new order with the reference of her order from before the upgrade: %v; want ErrClientRefTaken", err)
	}
	if o, _ := h.Load(ctx, "o2", "", ""); o.State.Version != 0 {
		t.Error("the refused order was created")
	}
	if _, err := h.Handle(ctx, "o3", withRef("o3", "c-1", "po-1"), as("bob", "new")); err != nil {
		t.Errorf("bob's order with the reference of alice's order from before the upgrade: %v", err)
	}
	// A create claimed before the upgrade but never appended (the server died): its retry
	// after the upgrade (same order id) goes through, and so does another order.
	legacyClaim("c-2", "po-2", "o4")
	if _, err := h.Handle(ctx, "o4", withRef("o4", "c-2", "po-2"), as("alice", "retried")); err != nil {
		t.Errorf("retry of a create claimed before the upgrade: %v", err)
	}
	legacyClaim("c-3", "po-3", "o-never")
	if _, err := h.Handle(ctx, "o5", withRef("o5", "c-3", "po-3"), as("alice", "other")); err != nil {
		t.Errorf("an order with the reference of a legacy claim whose order never came to be: %v", err)
	}
}
