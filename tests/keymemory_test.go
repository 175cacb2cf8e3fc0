package tests

import (
	"fmt"
	"strings"
	"testing"
)

// --key-memory bounds in MiB what completed keys take in memory: answers pushed out, or too
// large to keep (an order of 100 lines answers 17 KB, over a 64th of 1 MiB), are replayed from
// the store, byte for byte.
func TestKeyMemoryIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--key-memory", "1")
	orderOf := func(customer string, lines int) (string, string) {
		o := newOrder{CustomerID: customer, Currency: "EUR"}
		for i := range lines {
			o.Lines = append(o.Lines, line{SKU: fmt.Sprintf("%03d%s", i, strings.Repeat("s", 120)), Quantity: 1, UnitPrice: 100})
		}
		return createdID(t, s.do(t, "POST", "/v1/orders", "memory-"+customer, o)), o.Lines[0].SKU
	}
	large, largeSKU := orderOf("c-large", 100)
	medium, mediumSKU := orderOf("c-medium", 40)

	type sent struct {
		path, key string
		first     *response
	}
	var all []sent
	noop := map[string]any{"quantity": 1} // the quantity the line has: answers the order as it is
	send := func(path, key string) {
		r := s.do(t, "PUT", path, key, noop)
		wantStatus(t, r, 200)
		all = append(all, sent{path, key, r})
	}
	for i := range 150 { // some 1.1 MB of answers kept in memory, more than it holds
		send("/v1/orders/"+medium+"/lines/"+mediumSKU, fmt.Sprint("memory-medium-", i))
		if i < 20 {
			send("/v1/orders/"+large+"/lines/"+largeSKU, fmt.Sprint("memory-large-", i))
		}
	}
	if len(all[1].first.body) <= (1<<20)/64 || len(all[0].first.body) > (1<<20)/64*7/8 {
		t.Fatalf("answers of %d and %d bytes; want one over a 64th of the memory and one under", len(all[1].first.body), len(all[0].first.body))
	}
	remembered := func() float64 {
		v, ok := s.metrics(t)["orders_idempotency_memory_bytes"]
		if !ok {
			t.Fatal("no orders_idempotency_memory_bytes in /metrics")
		}
		return v
	}
	if got := remembered(); got <= 0 || got > 1<<20 {
		t.Errorf("orders_idempotency_memory_bytes %v after the commands; want more than 0, at most 1 MiB", got)
	}
	for _, c := range all {
		checkReplay(t, c.first, s.do(t, "PUT", c.path, c.key, noop))
	}
	if got := remembered(); got <= 0 || got > 1<<20 {
		t.Errorf("orders_idempotency_memory_bytes %v after the replays; want more than 0, at most 1 MiB", got)
	}
}
