package projections

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/oklog/ulid/v2"
)

// Queries reads the read models through their views. It is safe for concurrent use.
type Queries struct {
	DB *sql.DB
}

// OrderRow is a row of the orders read model.
type OrderRow struct {
	Principal string
	Position  uint64 // commit position of the order's last event folded
	State     order.State
}

// Order returns the order id, and false if the read model has no such order.
func (q Queries) Order(ctx context.Context, id string) (OrderRow, bool, error) {
	var row OrderRow
	var state []byte
	err := q.DB.QueryRowContext(ctx, `SELECT principal, position, state FROM orders WHERE id = ?`, id).Scan(&row.Principal, &row.Position, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return OrderRow{}, false, nil
	}
	if err != nil {
		return OrderRow{}, false, err
	}
	if err := json.Unmarshal(state, &row.State); err != nil {
		return OrderRow{}, false, fmt.Errorf("order %s: %w", id, err)
	}
	return row, true, nil
}

// OrderFilter selects orders for a listing. Empty fields select everything.
type OrderFilter struct {
	Principal  string // only orders this principal created
	Status     string
	CustomerID string
	// After is the cursor: the id of the last order of the previous page. Orders are listed
	// newest first by id (ULIDs sort by creation time), so orders created while a client pages
	// land before its cursor and never shift or repeat a page.
	After string
	Limit int
	// CreatedFrom and CreatedBefore, if not zero, keep the orders created at or after, and
	// before, those times, to the millisecond. An order's id is a ULID that starts with the
	// time it was created, so they bound the ids, and the listing stays on the id index.
	CreatedFrom, CreatedBefore time.Time
}

// idAt is the least ULID of time t, as a string: every id of an order created at or after t
// sorts at or after it.
func idAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if t.UnixMilli() < 0 {
		return "0" // before every id
	}
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(t)); err != nil {
		return "8" // beyond what a ULID holds (its first digit is at most 7): after every id
	}
	return id.String()
}

// ListOrders returns a page of orders and the cursor of the next page ("" at the end).
func (q Queries) ListOrders(ctx context.Context, f OrderFilter) ([]OrderRow, string, error) {
	return listOrders(ctx, q.DB, f)
}

// querier is what a listing needs of a *sql.DB or *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func listOrders(ctx context.Context, db querier, f OrderFilter) ([]OrderRow, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	query := `SELECT principal, position, state, id FROM orders WHERE 1 = 1`
	var args []any
	for _, c := range []struct{ cond, v string }{
		{" AND principal = ?", f.Principal},
		{" AND status = ?", f.Status},
		{" AND customer_id = ?", f.CustomerID},
		{" AND id < ?", f.After},
		{" AND id >= ?", idAt(f.CreatedFrom)},
		{" AND id < ?", idAt(f.CreatedBefore)},
	} {
		if c.v != "" {
			query += c.cond
			args = append(args, c.v)
		}
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []OrderRow
	var ids []string
	for rows.Next() {
		var row OrderRow
		var state []byte
		var id string
		if err := rows.Scan(&row.Principal, &row.Position, &state, &id); err != nil {
			return nil, "", err
		}
		if err := json.Unmarshal(state, &row.State); err != nil {
			return nil, "", fmt.Errorf("order %s: %w", id, err)
		}
		out = append(out, row)
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	if len(out) > limit {
		return out[:limit], ids[limit-1], nil
	}
	return out, "", nil
}

// KeyRow summarises an idempotency key.
type KeyRow struct {
	Principal   string
	Key         string
	Method      string
	Path        string
	OrderID     string
	Status      int // 0 while in flight
	ClaimedAt   time.Time
	CompletedAt time.Time
	ExpiresAt   time.Time
}

const keyColumns = `principal, key, method, path, order_id, status, claimed_at, completed_at, expires_at`

// scanKey reads the keyColumns of one row.
func scanKey(scan func(...any) error) (KeyRow, error) {
	var row KeyRow
	var status sql.NullInt64
	var claimed, expires string
	var completed sql.NullString
	if err := scan(&row.Principal, &row.Key, &row.Method, &row.Path, &row.OrderID, &status, &claimed, &completed, &expires); err != nil {
		return KeyRow{}, err
	}
	row.Status = int(status.Int64)
	row.ClaimedAt, _ = time.Parse(time.RFC3339Nano, claimed)
	row.ExpiresAt, _ = time.Parse(time.RFC3339Nano, expires)
	if completed.Valid {
		row.CompletedAt, _ = time.Parse(time.RFC3339Nano, completed.String)
	}
	return row, nil
}

// Key returns the principal's key, and false if the read model has none.
func (q Queries) Key(ctx context.Context, principal, key string) (KeyRow, bool, error) {
	row, err := scanKey(q.DB.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM idempotency_keys WHERE principal = ? AND key = ?`,
		principal, key).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return KeyRow{}, false, nil
	}
	return row, err == nil, err
}

// PaymentOrder returns the principal's order that started a payment with the id (the latest,
// if several did).
func (q Queries) PaymentOrder(ctx context.Context, principal, paymentID string) (string, bool, error) {
	return q.one(ctx, `SELECT order_id FROM payments WHERE principal = ? AND payment_id = ?`, principal, paymentID)
}

// UnappliedRow is a provider's event that was not applied (see Lookups).
type UnappliedRow struct {
	Position                                uint64
	Provider, Principal, EventID, EventType string
	OrderID, Reason                         string
	RecordedAt                              time.Time
}

// Unapplied returns a page of the providers' events not applied, newest first: provider's
// only, if provider is not "", before position before (0: from the newest), at most limit.
func (q Queries) Unapplied(ctx context.Context, provider string, before uint64, limit int) ([]UnappliedRow, error) {
	if before == 0 {
		before = math.MaxInt64
	}
	return all(ctx, q.DB, `SELECT position, provider, principal, event_id, event_type, order_id, reason, recorded_at
		FROM provider_events WHERE (? = '' OR provider = ?) AND position < ? ORDER BY position DESC LIMIT ?`,
		func(scan func(...any) error) (r UnappliedRow, err error) {
			var at string
			var pos int64
			err = scan(&pos, &r.Provider, &r.Principal, &r.EventID, &r.EventType, &r.OrderID, &r.Reason, &at)
			r.Position = uint64(pos)
			if err == nil {
				r.RecordedAt, err = time.Parse(time.RFC3339Nano, at)
			}
			return r, err
		}, provider, provider, int64(min(before, math.MaxInt64)), limit)
}

// ClientReferenceOrder returns the order the principal created for its customer with a client
// reference.
func (q Queries) ClientReferenceOrder(ctx context.Context, principal, customerID, ref string) (string, bool, error) {
	return q.one(ctx, `SELECT order_id FROM client_references WHERE principal = ? AND customer_id = ? AND client_reference = ?`,
		principal, customerID, ref)
}

// PaymentRow is a row of the payments lookup: the order a principal's payment id leads to.
type PaymentRow struct {
	Principal, PaymentID, OrderID string
}

// ClientReferenceRow is a row of the client-references lookup: the order a principal created
// for its customer with a reference.
type ClientReferenceRow struct {
	Principal, CustomerID, ClientReference, OrderID string
}

// LookupRows is every row of the lookups read model as of its checkpoint.
type LookupRows struct {
	At               eventstore.Position // the checkpoint: the rows hold every event up to it, none after
	Payments         []PaymentRow
	ClientReferences []ClientReferenceRow
	Keys             []KeyRow
}

// Snapshot is the read models as of one moment: its reads all see the same state, however far
// the projections go on meanwhile. Close it when done; while it is open, the read-model file's
// WAL cannot be checkpointed past it.
type Snapshot struct {
	conn *sql.Conn
}

// Snapshot opens a snapshot of the read models, taken now. It takes no write lock: a deferred
// transaction begun by hand, since the driver begins every other one IMMEDIATE (the store's
// files are opened so), which would hold up the projections' writer. In WAL mode the first
// read fixes the snapshot until the end of the transaction.
func (q Queries) Snapshot(ctx context.Context) (*Snapshot, error) {
	conn, err := q.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		conn.Close()
		return nil, err
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		conn.Close()
		return nil, err
	}
	return &Snapshot{conn: conn}, nil
}

// Close ends the snapshot.
func (s *Snapshot) Close() error {
	_, err := s.conn.ExecContext(context.Background(), `ROLLBACK`)
	return errors.Join(err, s.conn.Close())
}

// ListOrders is Queries.ListOrders in the snapshot.
func (s *Snapshot) ListOrders(ctx context.Context, f OrderFilter) ([]OrderRow, string, error) {
	return listOrders(ctx, s.conn, f)
}

// Checkpoint returns the projection's checkpoint and the version of its live generation. ok
// is false if the file has no such projection.
func (s *Snapshot) Checkpoint(ctx context.Context, name string) (at eventstore.Position, version int, ok bool, err error) {
	// A checkpoint table from before projections had versions has no version column: its
	// generations are of version 1.
	var columns, versioned int
	if err := s.conn.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(name = 'version'), 0) FROM pragma_table_info('projection_checkpoints')`).
		Scan(&columns, &versioned); err != nil || columns == 0 {
		return eventstore.Position{}, 0, false, err
	}
	column := `1`
	if versioned > 0 {
		column = `version`
	}
	err = s.conn.QueryRowContext(ctx, `SELECT commit_position, prepare_position, `+column+` FROM projection_checkpoints WHERE name = ?`, name).
		Scan(&at.Commit, &at.Prepare, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return eventstore.Position{}, 0, false, nil
	}
	return at, version, err == nil, err
}

// LookupRows reads every row of the lookups and their checkpoint. ok is false if the file has
// no lookups, or lookups of another version than Lookups.Version, whose rows mean other things.
func (s *Snapshot) LookupRows(ctx context.Context) (rows LookupRows, ok bool, err error) {
	at, version, ok, err := s.Checkpoint(ctx, Lookups{}.Name())
	if err != nil || !ok || version != (Lookups{}).Version() {
		return LookupRows{}, false, err
	}
	rows.At = at
	if rows.Payments, err = all(ctx, s.conn, `SELECT principal, payment_id, order_id FROM payments`, func(scan func(...any) error) (r PaymentRow, err error) {
		return r, scan(&r.Principal, &r.PaymentID, &r.OrderID)
	}); err != nil {
		return LookupRows{}, false, err
	}
	if rows.ClientReferences, err = all(ctx, s.conn, `SELECT principal, customer_id, client_reference, order_id FROM client_references`, func(scan func(...any) error) (r ClientReferenceRow, err error) {
		return r, scan(&r.Principal, &r.CustomerID, &r.ClientReference, &r.OrderID)
	}); err != nil {
		return LookupRows{}, false, err
	}
	if rows.Keys, err = all(ctx, s.conn, `SELECT `+keyColumns+` FROM idempotency_keys`, scanKey); err != nil {
		return LookupRows{}, false, err
	}
	return rows, true, nil
}

// all reads every row of query with args, each with row.
func all[T any](ctx context.Context, db querier, query string, row func(scan func(...any) error) (T, error), args ...any) ([]T, error) {
	rs, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []T
	for rs.Next() {
		r, err := row(rs.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

func (q Queries) one(ctx context.Context, query string, args ...any) (string, bool, error) {
	var v string
	err := q.DB.QueryRowContext(ctx, query, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}
