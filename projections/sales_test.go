package projections_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
	"github.com/google/go-cmp/cmp"
)

// recorded is e as the log holds it in stream of order id at revision.
func recorded(t *testing.T, id string, revision uint64, e order.Event) eventstore.RecordedEvent {
	t.Helper()
	typ, data, err := order.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.RecordedEvent{Stream: command.StreamName(id), Revision: revision, Type: typ, Data: data,
		Position: eventstore.Position{Commit: revision + 1, Prepare: revision + 1}}
}

// applySales creates the sales table in a new database and applies each batch in a
// transaction of its own.
func applySales(t *testing.T, batches ...[]eventstore.RecordedEvent) *sql.DB {
	t.Helper()
	db := readModelsDB(t)
	ctx := context.Background()
	tables := projections.Tables{"sales": "sales"}
	for i, batch := range append([][]eventstore.RecordedEvent{nil}, batches...) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			err = projections.Sales{}.Create(ctx, tx, tables)
		} else {
			err = projections.Sales{}.Apply(ctx, tx, tables, batch)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// The sales model counts a payment on the day it was confirmed, a refund on the day it
// completed, and a duplicate charge apart from the amount paid; days are UTC days.
func TestSalesFoldsPaymentsRefundsAndDuplicateCharges(t *testing.T) {
	day1 := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	day2 := day1.Add(time.Hour) // 2026-03-02 00:30 UTC
	eur := func(n int64) order.Money { return order.Money{Amount: n, Currency: "EUR"} }
	usd := func(n int64) order.Money { return order.Money{Amount: n, Currency: "USD"} }
	db := applySales(t,
		[]eventstore.RecordedEvent{
			recorded(t, "a", 0, order.Created{OrderID: "a", Currency: "EUR", At: day1}),
			recorded(t, "a", 1, order.PaymentStarted{PaymentID: "pa", Amount: eur(500), At: day1}),
			recorded(t, "a", 2, order.PaymentConfirmed{PaymentID: "pa", Amount: eur(500), At: day1}),
			recorded(t, "a", 3, order.DuplicateChargeRecorded{PaymentID: "pa2", Amount: eur(500), Reason: order.ChargeAlreadyPaid, At: day1}),
			recorded(t, "b", 2, order.PaymentConfirmed{PaymentID: "pb", Amount: usd(700), At: day1}),
		},
		[]eventstore.RecordedEvent{
			recorded(t, "a", 4, order.RefundRequested{RefundID: "r", Amount: eur(200), At: day1}),
			recorded(t, "a", 5, order.RefundCompleted{RefundID: "r", Amount: eur(200), At: day2}),
			recorded(t, "c", 2, order.PaymentConfirmed{PaymentID: "pc", Amount: eur(300), At: day1.Add(-time.Hour)}),
			recorded(t, "d", 2, order.PaymentConfirmed{PaymentID: "pd", Amount: eur(100), At: day2.In(time.FixedZone("UTC-5", -5*3600))}),
		})
	got, next, err := projections.Queries{DB: db}.Sales(context.Background(), projections.SalesFilter{From: "2026-03-01", To: "2026-03-02"})
	if err != nil {
		t.Fatal(err)
	}
	want := []projections.SalesRow{
		{Day: "2026-03-01", Currency: "EUR", OrdersPaid: 2, AmountPaid: 800, DuplicateCharges: 1, DuplicateCharged: 500},
		{Day: "2026-03-01", Currency: "USD", OrdersPaid: 1, AmountPaid: 700},
		{Day: "2026-03-02", Currency: "EUR", OrdersPaid: 1, AmountPaid: 100, Refunded: 200},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sales (-want +got):\n%s", diff)
	}
	if next != (projections.SalesCursor{}) {
		t.Errorf("next = %v, want none", next)
	}
	if net := got[2].Net(); net != -100 {
		t.Errorf("net of 2026-03-02 = %d, want -100", net)
	}
}

// A page of the sales model ends at its limit with a cursor that the next page starts after;
// a currency and a range of days narrow it.
func TestSalesPages(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var batch []eventstore.RecordedEvent
	for i := range 5 {
		at := start.AddDate(0, 0, i)
		batch = append(batch,
			recorded(t, "e", uint64(i), order.PaymentConfirmed{PaymentID: "p", Amount: order.Money{Amount: 1, Currency: "EUR"}, At: at}),
			recorded(t, "u", uint64(i), order.PaymentConfirmed{PaymentID: "p", Amount: order.Money{Amount: 1, Currency: "USD"}, At: at}))
	}
	q := projections.Queries{DB: applySales(t, batch)}
	var seen []string
	f := projections.SalesFilter{From: "2026-03-02", To: "2026-03-04", Limit: 2}
	for page := 0; ; page++ {
		rows, next, err := q.Sales(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			seen = append(seen, r.Day+" "+r.Currency)
		}
		if next == (projections.SalesCursor{}) {
			break
		}
		f.After = next
	}
	want := []string{"2026-03-02 EUR", "2026-03-02 USD", "2026-03-03 EUR", "2026-03-03 USD", "2026-03-04 EUR", "2026-03-04 USD"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	rows, _, err := q.Sales(context.Background(), projections.SalesFilter{From: "2026-03-01", To: "2026-03-31", Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || rows[0].Currency != "USD" {
		t.Errorf("USD rows = %+v, want 5 of USD", rows)
	}
}
