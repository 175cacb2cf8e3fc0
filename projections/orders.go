package projections

import (
	json "github.com/goccy/go-json"

	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// Orders is the orders read model: one row per order, with the order's state folded from its
// events, for listings by status and customer and for reads by id.
type Orders struct{}

var _ Projection = Orders{}

func (Orders) Name() string { return "orders" }

// Version 2: orders have a channel and lines a name (order.created.v2, order.line-added.v2).
func (Orders) Version() int { return 2 }

func (Orders) Filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{command.StreamName("")}}
}

func (Orders) Tables() []string { return []string{"orders"} }

func (Orders) Create(ctx context.Context, tx *sql.Tx, t Tables) error {
	o := t["orders"]
	_, err := tx.ExecContext(ctx, strings.NewReplacer("{orders}", o).Replace(`
		CREATE TABLE {orders} (
			id          TEXT PRIMARY KEY,
			principal   TEXT NOT NULL,   -- who created it
			customer_id TEXT NOT NULL,
			status      TEXT NOT NULL,
			currency    TEXT NOT NULL,
			total       INTEGER NOT NULL,
			paid        INTEGER NOT NULL,
			refunded    INTEGER NOT NULL,
			line_count  INTEGER NOT NULL,
			version     INTEGER NOT NULL, -- events folded
			position    INTEGER NOT NULL, -- commit position of the last one
			created_at  TEXT NOT NULL,
			updated_at  TEXT NOT NULL,
			state       BLOB NOT NULL     -- order.State as JSON
		) STRICT;
		CREATE INDEX {orders}_by_status ON {orders} (status, id);
		CREATE INDEX {orders}_by_customer ON {orders} (customer_id, id);
		CREATE INDEX {orders}_by_principal ON {orders} (principal, id);`))
	return err
}

// orderRow is a row being updated by a batch.
type orderRow struct {
	principal string
	state     order.State
	position  uint64
	changed   bool
}

// Apply folds the batch into the rows it touches, reading each row once and writing it once.
func (Orders) Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error {
	table := t["orders"]
	rows := map[string]*orderRow{}
	var touched []string
	for _, e := range events {
		id := strings.TrimPrefix(e.Stream, command.StreamName(""))
		row, ok := rows[id]
		if !ok && e.Revision == 0 {
			// A new order: no row to read (a rebuild meets only these).
			row = &orderRow{}
			rows[id] = row
			touched = append(touched, id)
		} else if !ok {
			row = &orderRow{}
			var state []byte
			err := tx.QueryRowContext(ctx, `SELECT principal, position, state FROM `+table+` WHERE id = ?`, id).Scan(&row.principal, &row.position, &state)
			switch {
			case err == nil:
				if err := json.Unmarshal(state, &row.state); err != nil {
					return fmt.Errorf("order %s: stored state: %w", id, err)
				}
			case err != sql.ErrNoRows:
				return err
			}
			rows[id] = row
			touched = append(touched, id)
		}
		if e.Revision < uint64(row.state.Version) {
			continue // already folded
		}
		if e.Revision != uint64(row.state.Version) {
			return fmt.Errorf("order %s: event at revision %d after %d events: the stream has a gap", id, e.Revision, row.state.Version)
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		if row.state.Version == 0 {
			var md command.Metadata
			json.Unmarshal(e.Metadata, &md)
			row.principal = md.Principal
		}
		row.state = order.Evolve(row.state, ev)
		row.position, row.changed = e.Position.Commit, true
	}
	for _, id := range touched {
		row := rows[id]
		if !row.changed {
			continue
		}
		state, err := json.Marshal(row.state)
		if err != nil {
			return err
		}
		s := row.state
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO `+table+` (id, principal, customer_id, status, currency, total, paid,
			refunded, line_count, version, position, created_at, updated_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, row.principal, s.CustomerID, s.Status.String(), string(s.Currency), s.Total.Amount, s.Paid.Amount,
			s.Refunded.Amount, len(s.Lines), s.Version, row.position, s.CreatedAt.Format(time.RFC3339Nano), s.UpdatedAt.Format(time.RFC3339Nano), state)
		if err != nil {
			return fmt.Errorf("order %s: %w", id, err)
		}
	}
	return nil
}
