package command_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/acme/orders/domain/order"
)

// BenchmarkCachedOrderBytes compares what a cached order is charged (CachedBytes) with the
// heap the cache gives back when it is dropped, for orders created with 100 lines and for
// small ones taken through five keyed commands:
//
//	go test -run '^$' -bench CachedOrderBytes -benchtime 2000x ./command/
func BenchmarkCachedOrderBytes(b *testing.B) {
	for _, shape := range []struct {
		name  string
		lines int
		then  func(id string) []order.Command
	}{
		{"100-lines", 100, nil},
		{"5-commands", 1, func(id string) []order.Command {
			return []order.Command{
				order.AddLine{SKU: "sku-extra", Name: "Extra", Quantity: 1, UnitPrice: eur(500)},
				order.StartPayment{PaymentID: "pay-" + id, Amount: eur(1500)},
				order.ConfirmPayment{PaymentID: "pay-" + id, Amount: eur(1500)},
				order.Ship{Carrier: "dhl", TrackingNumber: "00340434161094042557"},
			}
		}},
	} {
		b.Run(shape.name, func(b *testing.B) {
			h, _ := newHandler(b)
			h.CachedOrderBytes = 1 << 40
			ctx := context.Background()
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("o-%06d", i)
				c := order.CreateOrder{OrderID: id, CustomerID: "customer-" + id, Currency: "EUR", ClientRef: "ref-" + id}
				for l := range shape.lines {
					c.Lines = append(c.Lines, order.AddLine{SKU: fmt.Sprintf("sku-%04d", l), Name: fmt.Sprintf("Product number %d", l), Quantity: 1, UnitPrice: eur(1000)})
				}
				for n, cmd := range append([]order.Command{c}, then(shape.then, id)...) {
					if _, err := h.HandleKept(ctx, id, cmd, keyed(fmt.Sprintf("key-%s-%d", id, n), "fp")); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			charged := h.CachedBytes()
			heap := heapBefore(func() { h.ForgetCached() })
			b.ReportMetric(heap/float64(b.N), "heap-B/order")
			b.ReportMetric(float64(charged)/float64(b.N), "charged-B/order")
		})
	}
}

// heapBefore is how much more heap is live before drop than after it.
func heapBefore(drop func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	drop()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(before.HeapAlloc) - int64(after.HeapAlloc))
}

func then(f func(string) []order.Command, id string) []order.Command {
	if f == nil {
		return nil
	}
	return f(id)
}
