package order_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acme/orders/domain/order"
)

func charge(paymentID string, amount int64) order.Charge {
	return order.Charge{PaymentID: paymentID, Amount: eur(amount), Reason: order.ChargeAlreadyPaid, At: now}
}

func paymentIDs(c order.Charges) []string {
	var ids []string
	for ch := range c.All() {
		ids = append(ids, ch.PaymentID)
	}
	return ids
}

// Charges that share a log each see their own part of it: what one path adds, an earlier
// value and another path never see, in the list, the count, the total or Recorded.
func TestChargesPathsDoNotSeeEachOther(t *testing.T) {
	base := order.NewCharges(charge("p1", 10), charge("p2", 20))
	a := base.Add(charge("a", 100))  // appends to the log base shares
	b := base.Add(charge("b", 1000)) // base is no longer the latest: copies
	a2 := a.Add(charge("a2", 5))     // still the latest of its log
	for _, c := range []struct {
		name  string
		got   order.Charges
		ids   []string
		total int64
	}{
		{"base", base, []string{"p1", "p2"}, 30},
		{"a", a, []string{"p1", "p2", "a"}, 130},
		{"b", b, []string{"p1", "p2", "b"}, 1030},
		{"a2", a2, []string{"p1", "p2", "a", "a2"}, 135},
	} {
		if got := paymentIDs(c.got); !slices.Equal(got, c.ids) {
			t.Errorf("%s holds %v, want %v", c.name, got, c.ids)
		}
		if c.got.Len() != len(c.ids) || c.got.Total() != eur(c.total) {
			t.Errorf("%s: %d charges of %v in all, want %d of %v", c.name, c.got.Len(), c.got.Total(), len(c.ids), eur(c.total))
		}
		for _, id := range []string{"p1", "a", "b", "a2", "none"} {
			if got, want := c.got.Recorded(id), slices.Contains(c.ids, id); got != want {
				t.Errorf("%s: Recorded(%s) = %v, want %v", c.name, id, got, want)
			}
		}
	}
}

// States shared between goroutines (the handler remembers recent orders) may be evolved
// from the same State at once: each gets its own charges (run with -race).
func TestChargesConcurrentPaths(t *testing.T) {
	var base order.Charges
	for i := range 100 {
		base = base.Add(charge(fmt.Sprint("p", i), 1))
	}
	var wg sync.WaitGroup
	got := make([]order.Charges, 8)
	for g := range got {
		wg.Go(func() {
			c := base
			for i := range 50 {
				c = c.Add(charge(fmt.Sprintf("g%d-%d", g, i), 1))
				if !c.Recorded("p0") || c.Recorded(fmt.Sprintf("g%d-%d", (g+1)%len(got), i)) {
					t.Errorf("path %d sees another path's charges", g)
				}
			}
			got[g] = c
		})
	}
	wg.Wait()
	for g, c := range got {
		ids := paymentIDs(c)
		if len(ids) != 150 || ids[99] != "p99" || ids[100] != fmt.Sprintf("g%d-0", g) || ids[149] != fmt.Sprintf("g%d-49", g) {
			t.Errorf("path %d holds %d charges, ending %v", g, len(ids), ids[99:])
		}
	}
	if base.Len() != 100 || base.Recorded("g0-0") {
		t.Errorf("the shared charges changed: %d charges", base.Len())
	}
}

// Read models keep States as JSON: Charges encode as the []Charge States held before.
func TestChargesJSONAsBefore(t *testing.T) {
	before := struct{ DuplicateCharges []order.Charge }{[]order.Charge{charge("p1", 10), charge("p2", 20)}}
	old, err := json.Marshal(before)
	if err != nil {
		t.Fatal(err)
	}
	var s order.State
	if err := json.Unmarshal(old, &s); err != nil {
		t.Fatal(err)
	}
	if !s.DuplicateCharges.Equal(order.NewCharges(before.DuplicateCharges...)) || s.DuplicateCharges.Total() != eur(30) {
		t.Fatalf("decoded %v", paymentIDs(s.DuplicateCharges))
	}
	now, err := json.Marshal(struct{ DuplicateCharges order.Charges }{s.DuplicateCharges})
	if err != nil {
		t.Fatal(err)
	}
	if string(now) != string(old) {
		t.Errorf("encoded\n%s\nwant\n%s", now, old)
	}
	none, _ := json.Marshal(struct{ DuplicateCharges order.Charges }{})
	if string(none) != `{"DuplicateCharges":null}` {
		t.Errorf("no charges encode as %s", none)
	}
}
