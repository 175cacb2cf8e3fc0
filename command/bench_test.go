package command_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
)

// BenchmarkLoadOrder1000 folds a 1,000-event order stream from the embedded store, each time
// after a raw read of the same stream, and reports both and their ratio: the fold's cost
// beyond reading its events, on the same machine in the same instant.
func BenchmarkLoadOrder1000(b *testing.B) {
	s, err := sqlite.Open(b.TempDir(), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := &command.Handler{Store: s}
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", order.CreateOrder{OrderID: "o1", CustomerID: "c", Currency: "EUR"}, keyed("k-create", "fp")); err != nil {
		b.Fatal(err)
	}
	// 999 more events: quantity changes on a few lines, each with its own key.
	for i := range 999 {
		c := order.Command(order.AddLine{SKU: fmt.Sprint("sku-", i%50), Quantity: 1, UnitPrice: eur(100)})
		if _, err := h.Handle(ctx, "o1", c, keyed(fmt.Sprint("k-", i), "fp")); err != nil {
			b.Fatal(err)
		}
	}
	var read, load time.Duration
	for b.Loop() {
		start := time.Now()
		for _, err := range s.ReadStream(ctx, command.StreamName("o1"), eventstore.ReadStreamOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
		}
		read += time.Since(start)
		start = time.Now()
		o, err := h.Load(ctx, "o1", "shop-1", "k-500")
		load += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if o.State.Version != 1000 || o.Key == nil {
			b.Fatalf("loaded version %d, key found %v", o.State.Version, o.Key != nil)
		}
	}
	b.ReportMetric(float64(load.Microseconds())/1000/float64(b.N), "ms/load")
	b.ReportMetric(float64(read.Microseconds())/1000/float64(b.N), "ms/read")
	b.ReportMetric(float64(load)/float64(read), "load/read")
}
