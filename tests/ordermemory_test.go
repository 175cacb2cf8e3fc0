package tests

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

// --order-memory bounds in MiB what the orders kept as last written take: creates of orders of
// 100 lines push the first ones out, whose next commands read them from the store. With
// ORDERS_BIG_ORDERS set (12000 to measure), that many are created under the default bound and
// the test logs how much the server's resident memory grew, which must stay under 200 MB.
func TestOrderMemoryIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	n, args := 200, []string{"--order-memory", "1"}
	if v := os.Getenv("ORDERS_BIG_ORDERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ORDERS_BIG_ORDERS=%q: want a positive count", v)
		}
		args = nil
	}
	s := startServer(t, "", args...)
	pid := s.current().cmd.Process.Pid
	before := rssKiB(pid)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				o := newOrder{CustomerID: fmt.Sprint("c-big-", i), Currency: "EUR"}
				for l := range 100 {
					o.Lines = append(o.Lines, line{SKU: fmt.Sprintf("sku-%03d", l), Quantity: 1, UnitPrice: 100})
				}
				ids[i] = createdID(t, s.do(t, "POST", "/v1/orders", fmt.Sprint("big-", i), o))
			}
		})
	}
	wg.Wait()
	after := rssKiB(pid)
	charged := s.metrics(t)["orders_order_memory_bytes"]
	t.Logf("%d orders of 100 lines: server RSS %d KiB before, %d KiB after (+%d MB); orders_order_memory_bytes %.0f",
		n, before, after, (after-before)/1024, charged)
	bound := float64(1 << 20)
	if args == nil {
		bound = 16 << 20
		if after-before > 200*1000 {
			t.Errorf("RSS grew by %d MB; want under 200 MB", (after-before)/1024)
		}
	}
	if charged <= 0 || charged > bound {
		t.Errorf("orders_order_memory_bytes %.0f; want more than 0, at most %.0f", charged, bound)
	}
	// The first order was pushed out: its next command reads it and still holds.
	wantStatus(t, s.do(t, "PUT", "/v1/orders/"+ids[0]+"/lines/sku-000", "big-again", map[string]any{"quantity": 2}), 200)
}
