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
	id        string
	principal string
	state     order.State
	position  uint64
	changed   bool
}

// ordersBatch folds a batch into the rows it touches, reading each row once and writing it
// once: an order created in the batch, with its lines, is one INSERT.
type ordersBatch struct {
	ctx   context.Context
	tx    *sql.Tx
	table string
	index map[string]int // order id → its row in rows
	rows  []orderRow     // in the order the batch first meets them
}

// Apply folds the batch into the rows it touches, reading each row once and writing it once.
func (Orders) Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error {
	b := &ordersBatch{ctx: ctx, tx: tx, table: t["orders"], index: map[string]int{}}
	for _, e := range events {
		if err := b.fold(e); err != nil {
			return err
		}
	}
	return b.write()
}

// orderStreams is the prefix of every order's stream name.
var orderStreams = command.StreamName("")

func (b *ordersBatch) fold(e eventstore.RecordedEvent) error {
	id := strings.TrimPrefix(e.Stream, orderStreams)
	row, err := b.row(id, e.Revision)
	if err != nil {
		return err
	}
	if e.Revision < uint64(row.state.Version) {
		return nil // already folded
	}
	if e.Revision != uint64(row.state.Version) {
		return fmt.Errorf("order %s: event at revision %d after %d events: the stream has a gap", id, e.Revision, row.state.Version)
	}
	ev, err := order.Unmarshal(e.Type, e.Data)
	if err != nil {
		return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
	}
	if row.state.Version == 0 {
		row.principal = command.PrincipalOf(e.Metadata)
	}
	row.state = order.Evolve(row.state, ev)
	row.position, row.changed = e.Position.Commit, true
	return nil
}

// row returns order id's row, valid until the next call. The first time the batch meets the
// order it reads the row, unless the event is the order's first (a rebuild meets only these).
func (b *ordersBatch) row(id string, revision uint64) (*orderRow, error) {
	if i, ok := b.index[id]; ok {
		return &b.rows[i], nil
	}
	b.index[id] = len(b.rows)
	b.rows = append(b.rows, orderRow{id: id})
	row := &b.rows[len(b.rows)-1]
	if revision == 0 {
		return row, nil
	}
	var state []byte
	err := b.tx.QueryRowContext(b.ctx, `SELECT principal, position, state FROM `+b.table+` WHERE id = ?`, id).
		Scan(&row.principal, &row.position, &state)
	switch {
	case err == nil:
		if err := json.Unmarshal(state, &row.state); err != nil {
			return nil, fmt.Errorf("order %s: stored state: %w", id, err)
		}
	case err != sql.ErrNoRows:
		return nil, err
	}
	return row, nil
}

// write writes the rows the batch changed.
func (b *ordersBatch) write() error {
	// Built once per batch; the driver keeps it prepared on the runner's connection.
	insert := `INSERT OR REPLACE INTO ` + b.table + ` (id, principal, customer_id, status, currency, total, paid,
		refunded, line_count, version, position, created_at, updated_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for i := range b.rows {
		row := &b.rows[i]
		if !row.changed {
			continue
		}
		state, err := json.Marshal(row.state)
		if err != nil {
			return err
		}
		s := row.state
		_, err = b.tx.ExecContext(b.ctx, insert, row.id, row.principal, s.CustomerID, s.Status.String(), string(s.Currency), s.Total.Amount,
			s.Paid.Amount, s.Refunded.Amount, int64(len(s.Lines)), s.Version, row.position,
			s.CreatedAt.Format(time.RFC3339Nano), s.UpdatedAt.Format(time.RFC3339Nano), state)
		if err != nil {
			return fmt.Errorf("order %s: %w", row.id, err)
		}
	}
	return nil
}
