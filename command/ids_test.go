package command_test

import (
	"testing"
	"time"

	"github.com/acme/orders/command"
)

func TestOrderIDsSortInDrawOrder(t *testing.T) {
	g := command.NewOrderIDs()
	now := time.Now()
	prev := g.New(now)
	for range 10_000 {
		id := g.New(now) // the same millisecond: only monotonic entropy keeps the order
		if id.Compare(prev) <= 0 {
			t.Fatalf("%s drawn after %s sorts before it", id, prev)
		}
		prev = id
	}
}
