package projections_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/projections"
)

// CreatedFrom and CreatedBefore keep the orders whose ids (ULIDs) were made in between.
func TestListOrdersByCreationTime(t *testing.T) {
	f := start(t, t.TempDir())
	ctx := context.Background()
	ids := command.NewOrderIDs()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var made []string
	for i := range 3 {
		id := ids.New(t0.Add(time.Duration(i) * time.Hour)).String()
		c := order.CreateOrder{OrderID: id, CustomerID: "c", Currency: "EUR"}
		if _, err := f.orders.Handle(ctx, id, c, command.Metadata{Principal: "p"}); err != nil {
			t.Fatal(err)
		}
		made = append(made, id)
	}
	f.caughtUp(t)
	for _, tc := range []struct {
		from, before time.Time
		want         []string // newest first
	}{
		{t0.Add(30 * time.Minute), t0.Add(90 * time.Minute), made[1:2]},
		{t0.Add(time.Hour), time.Time{}, []string{made[2], made[1]}},
		{time.Time{}, t0.Add(time.Hour), made[:1]},
		{t0.Add(3 * time.Hour), time.Time{}, nil},
		{time.Unix(-1, 0), time.Time{}, []string{made[2], made[1], made[0]}},
	} {
		rows, _, err := f.q.ListOrders(ctx, projections.OrderFilter{CreatedFrom: tc.from, CreatedBefore: tc.before})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.State.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("created from %v before %v: %v, want %v", tc.from, tc.before, got, tc.want)
		}
	}
}
