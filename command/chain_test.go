package command_test

import (
	"context"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
)

// Every appended event chains to the one before it, from Genesis, and the chain recomputes
// from the stored bytes alone.
func TestEventsAreChained(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	for i, c := range []order.Command{create("o1"), order.AddLine{SKU: "b", Quantity: 1, UnitPrice: eur(5)}, order.Cancel{Reason: "r"}} {
		if _, err := h.Handle(ctx, "o1", c, keyed(string(rune('a'+i)), "fp")); err != nil {
			t.Fatal(err)
		}
	}
	prev := requireChain(t, s, "o1")
	events := streamEvents(t, s, "o1")
	if o, _ := h.Load(ctx, "o1", "", ""); o.Hash != prev {
		t.Fatalf("Load's last hash %s, chain ends at %s", o.Hash, prev)
	}
	// One flipped byte anywhere breaks the link.
	e := events[1]
	_, m, _ := command.SplitHash(e.Metadata)
	data := append([]byte(nil), e.Data...)
	data[len(data)/2] ^= 1
	hash, _, _ := command.SplitHash(e.Metadata)
	if command.ChainHash(command.StoredHash(events[0].Metadata), e.Stream, e.Revision, e.Type, data, m) == hash {
		t.Fatal("a flipped byte kept the hash")
	}
}
