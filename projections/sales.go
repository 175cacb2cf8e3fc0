package projections

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// Sales is the sales read model: per day (UTC) and currency, the orders paid, the amount paid,
// the duplicate charges recorded and the amount refunded. docs/projections.md builds it step by
// step as the example of a read model.
//
// A day's figures are those of the events decided that day (their At, in UTC), not of the
// days their orders were created:
//   - paid: an order counts once, on the day its payment was confirmed, for the confirmed
//     amount (order.PaymentConfirmed; the domain confirms one payment per order);
//   - duplicate charges: money captured that the order did not accept as its payment
//     (order.DuplicateChargeRecorded) is not "amount paid": it is the customer's and is owed
//     back, so it is counted apart, on the day it was recorded;
//   - refunded: a refund counts on the day it completed (order.RefundCompleted), not when it
//     was requested;
//   - net is the amount paid less the amount refunded.
type Sales struct{}

var _ Selective = Sales{}

func (Sales) Name() string { return "sales" }

func (Sales) Version() int { return 1 }

func (Sales) Filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{command.StreamName("")}}
}

func (Sales) Tables() []string { return []string{"sales"} }

func (Sales) Create(ctx context.Context, tx *sql.Tx, t Tables) error {
	_, err := tx.ExecContext(ctx, strings.NewReplacer("{sales}", t["sales"]).Replace(`
		CREATE TABLE {sales} (
			day               TEXT NOT NULL,    -- YYYY-MM-DD, UTC
			currency          TEXT NOT NULL,
			orders_paid       INTEGER NOT NULL,
			amount_paid       INTEGER NOT NULL, -- minor units
			duplicate_charges INTEGER NOT NULL,
			duplicate_charged INTEGER NOT NULL,
			refunded          INTEGER NOT NULL,
			PRIMARY KEY (day, currency)
		) STRICT, WITHOUT ROWID;`))
	return err
}

// salesKey is a row of the sales table.
type salesKey struct{ day, currency string }

// salesDelta is what a batch adds to a row.
type salesDelta struct {
	ordersPaid, amountPaid, duplicateCharges, duplicateCharged, refunded int64
}

// salesTypes are the event types the sales read model folds, by name without their version:
// every version of them carries the amount and the time.
var salesTypes = map[string]bool{
	order.Unversioned(order.PaymentConfirmed{}.EventType()):        true,
	order.Unversioned(order.RefundCompleted{}.EventType()):         true,
	order.Unversioned(order.DuplicateChargeRecorded{}.EventType()): true,
}

// Apply sums the batch per day and currency, then adds each sum to its row: one write per row
// the batch touches, however many events it holds.
func (Sales) Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error {
	deltas := map[salesKey]*salesDelta{}
	var keys []salesKey
	for _, e := range events {
		if !salesType(e.Type) {
			continue // most order events: decoding them would be wasted
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		var k salesKey
		var d salesDelta
		switch ev := ev.(type) {
		case order.PaymentConfirmed:
			k, d = salesKeyOf(ev.At, ev.Amount), salesDelta{ordersPaid: 1, amountPaid: ev.Amount.Amount}
		case order.RefundCompleted:
			k, d = salesKeyOf(ev.At, ev.Amount), salesDelta{refunded: ev.Amount.Amount}
		case order.DuplicateChargeRecorded:
			k, d = salesKeyOf(ev.At, ev.Amount), salesDelta{duplicateCharges: 1, duplicateCharged: ev.Amount.Amount}
		default:
			continue
		}
		sum, ok := deltas[k]
		if !ok {
			sum = &salesDelta{}
			deltas[k] = sum
			keys = append(keys, k)
		}
		sum.ordersPaid += d.ordersPaid
		sum.amountPaid += d.amountPaid
		sum.duplicateCharges += d.duplicateCharges
		sum.duplicateCharged += d.duplicateCharged
		sum.refunded += d.refunded
	}
	for _, k := range keys {
		d := deltas[k]
		_, err := tx.ExecContext(ctx, `INSERT INTO `+t["sales"]+` (day, currency, orders_paid, amount_paid, duplicate_charges,
			duplicate_charged, refunded) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, currency) DO UPDATE SET
			orders_paid = orders_paid + excluded.orders_paid, amount_paid = amount_paid + excluded.amount_paid,
			duplicate_charges = duplicate_charges + excluded.duplicate_charges,
			duplicate_charged = duplicate_charged + excluded.duplicate_charged, refunded = refunded + excluded.refunded`,
			k.day, k.currency, d.ordersPaid, d.amountPaid, d.duplicateCharges, d.duplicateCharged, d.refunded)
		if err != nil {
			return fmt.Errorf("sales %s %s: %w", k.day, k.currency, err)
		}
	}
	return nil
}

// salesType reports whether the sales read model folds events of type typ, of any version.
func salesType(typ string) bool { return salesTypes[order.Unversioned(typ)] }

// Applies reports whether Apply folds events of type typ: most order events it does not.
func (Sales) Applies(typ string) bool { return salesType(typ) }

// SalesDay is the layout of the sales read model's days.
const SalesDay = time.DateOnly

func salesKeyOf(at time.Time, m order.Money) salesKey {
	return salesKey{day: at.UTC().Format(SalesDay), currency: string(m.Currency)}
}

// SalesRow is one day's sales in one currency.
type SalesRow struct {
	Day              string // YYYY-MM-DD, UTC
	Currency         string
	OrdersPaid       int64
	AmountPaid       int64
	DuplicateCharges int64
	DuplicateCharged int64
	Refunded         int64
}

// Net is the amount paid less the amount refunded.
func (r SalesRow) Net() int64 { return r.AmountPaid - r.Refunded }

// SalesFilter selects days of the sales read model.
type SalesFilter struct {
	From, To string // days, YYYY-MM-DD, both included
	Currency string // empty: every currency
	// After is the cursor: the day and currency of the last row of the previous page.
	After SalesCursor
	Limit int
}

// SalesCursor is a position in the sales read model's order: by day, then currency.
type SalesCursor struct{ Day, Currency string }

// Sales returns a page of days with sales, by day then currency, and the cursor of the next
// page (the zero cursor at the end). Days without sales have no row.
func (q Queries) Sales(ctx context.Context, f SalesFilter) ([]SalesRow, SalesCursor, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT day, currency, orders_paid, amount_paid, duplicate_charges, duplicate_charged, refunded
		FROM sales WHERE day BETWEEN ? AND ?`
	args := []any{f.From, f.To}
	if f.Currency != "" {
		query += ` AND currency = ?`
		args = append(args, f.Currency)
	}
	if f.After != (SalesCursor{}) {
		query += ` AND (day, currency) > (?, ?)`
		args = append(args, f.After.Day, f.After.Currency)
	}
	query += ` ORDER BY day, currency LIMIT ?`
	args = append(args, limit+1)
	rows, err := q.DB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, SalesCursor{}, err
	}
	defer rows.Close()
	var out []SalesRow
	for rows.Next() {
		var r SalesRow
		if err := rows.Scan(&r.Day, &r.Currency, &r.OrdersPaid, &r.AmountPaid, &r.DuplicateCharges, &r.DuplicateCharged, &r.Refunded); err != nil {
			return nil, SalesCursor{}, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, SalesCursor{}, err
	}
	if len(out) > limit {
		last := out[limit-1]
		return out[:limit], SalesCursor{Day: last.Day, Currency: last.Currency}, nil
	}
	return out, SalesCursor{}, nil
}
