package projections

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/providers"
	json "github.com/goccy/go-json"
)

// Lookups is the key lookups read model: idempotency key → outcome summary, payment id →
// order, and (customer, client reference) → order, each per principal: clients choose their
// keys, payment ids, customer ids and references themselves, so two clients' are unrelated.
// It also lists the payment providers' events that were not applied, for auditors: those in
// the provider log (package providers) and those recorded on their orders
// (order.ProviderEventUnapplied), by provider and event id.
//
// A payment id leads to the first order that started it. The handler claims each payment id
// for one order (command.ErrPaymentIDTaken), so only payments started before it did can
// name a second order: such a start is logged and leaves the row as it is.
//
// A key's row stays KeyRowsKept past its expiry, answering as expired; then the lookups forget
// it, up to 64 rows with each key claimed after, so that the table holds about the keys of one
// TTL and KeyRowsKept. Past is as the log tells: before the newest claim applied, less
// KeyRowsKept. A rebuild forgets the same rows, whatever the day.
type Lookups struct {
	Log *slog.Logger // nil: slog.Default()
}

// KeyRowsKept is how long past its expiry a key's row stays in the idempotency-keys lookup.
const KeyRowsKept = 24 * time.Hour

var _ Selective = Lookups{}

func (Lookups) Name() string { return "lookups" }

// Version 6 finds a key's row by its stream only while the key is in flight; version 5
// forgets the rows of keys long expired (KeyRowsKept), their expiry stamped with a fixed width
// and indexed; version 4 lists the providers' events not applied; version 3 keeps the first
// order of a payment id, where version 2 kept the last; version 2 keyed payments and client
// references by principal too, where version 1 had one row per payment id, and per customer
// and reference, across principals.
func (Lookups) Version() int { return 6 }

func (Lookups) Filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{idempotency.StreamPrefix, command.StreamName(""), providers.LogPrefix}}
}

func (Lookups) Tables() []string {
	return []string{"idempotency_keys", "payments", "client_references", "provider_events"}
}

func (Lookups) Create(ctx context.Context, tx *sql.Tx, t Tables) error {
	_, err := tx.ExecContext(ctx, strings.NewReplacer(
		"{keys}", t["idempotency_keys"], "{payments}", t["payments"], "{refs}", t["client_references"],
		"{unapplied}", t["provider_events"]).Replace(`
		CREATE TABLE {keys} (
			stream       TEXT NOT NULL, -- the key's stream, which hashes principal and key
			principal    TEXT NOT NULL,
			key          TEXT NOT NULL,
			method       TEXT NOT NULL,
			path         TEXT NOT NULL,
			order_id     TEXT NOT NULL,
			status       INTEGER,          -- the outcome's status; NULL while in flight
			claimed_at   TEXT NOT NULL,
			completed_at TEXT,
			expires_at   TEXT NOT NULL,    -- fixed width (expiryStamp): its order is the times'
			PRIMARY KEY (principal, key)
		) STRICT;
		CREATE INDEX {keys}_expires ON {keys} (expires_at);
		-- Only keys in flight, whose outcome a later event of the stream brings, are found by
		-- their stream: a key stream's name is a hash, which lands on a random page of an index,
		-- and a key recorded with its outcome (one event) would pay that page for nothing.
		CREATE INDEX {keys}_in_flight ON {keys} (stream) WHERE status IS NULL;
		CREATE TABLE {payments} (
			principal  TEXT NOT NULL, -- who started the payment, the order's creator
			payment_id TEXT NOT NULL,
			order_id   TEXT NOT NULL,
			PRIMARY KEY (principal, payment_id)
		) STRICT;
		CREATE TABLE {refs} (
			principal        TEXT NOT NULL, -- who created the order
			customer_id      TEXT NOT NULL,
			client_reference TEXT NOT NULL,
			order_id         TEXT NOT NULL,
			PRIMARY KEY (principal, customer_id, client_reference)
		) STRICT;
		CREATE TABLE {unapplied} (
			position    INTEGER NOT NULL, -- commit position of the record: the listing's order
			provider    TEXT NOT NULL,
			principal   TEXT NOT NULL,
			event_id    TEXT NOT NULL,
			event_type  TEXT NOT NULL,
			order_id    TEXT NOT NULL,  -- the order it is recorded on, or that it named; "" for none
			reason      TEXT NOT NULL,
			recorded_at TEXT NOT NULL,
			PRIMARY KEY (principal, provider, event_id)
		) STRICT;
		CREATE INDEX {unapplied}_provider ON {unapplied} (provider, position);`))
	return err
}

// Apply applies the batch in order. A key's claim followed at once, in its stream, by its
// outcome (a create and its answer, which a live batch usually holds together) is written as one
// row with that outcome: one statement instead of an insert and an update.
func (l Lookups) Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error {
	outcomes, err := claimOutcomes(events)
	if err != nil {
		return err
	}
	b := newLookupsBatch(ctx, tx, l, t)
	for i, e := range events {
		var o keyOutcome
		if outcomes != nil {
			o = outcomes[i]
		}
		if err := b.apply(e, o); err != nil {
			return fmt.Errorf("%s@%d (%s): %w", e.Stream, e.Revision, e.Type, err)
		}
	}
	return b.forgetExpired()
}

// forgetExpired deletes up to 64 rows for each key the batch claimed whose expiry is more than
// KeyRowsKept before the newest claim, oldest first.
func (b *lookupsBatch) forgetExpired() error {
	if b.claimed == 0 {
		return nil
	}
	keys := b.t["idempotency_keys"]
	_, err := b.tx.ExecContext(b.ctx, `DELETE FROM `+keys+` WHERE rowid IN (SELECT rowid FROM `+keys+`
		WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`, expiryStamp(b.newest.Add(-KeyRowsKept)), 64*b.claimed)
	return err
}

// lookupsBatch applies a batch of the lookups. Its statements' SQL is built once per batch,
// not per event; the driver keeps them prepared on the runner's connection, by their text.
type lookupsBatch struct {
	l                             Lookups
	ctx                           context.Context
	tx                            *sql.Tx
	t                             Tables
	claim, complete, release, ref string // SQL
	// claimed counts the keys claimed in the batch; newest is the latest of their claims.
	claimed int
	newest  time.Time
}

func newLookupsBatch(ctx context.Context, tx *sql.Tx, l Lookups, t Tables) *lookupsBatch {
	keys := t["idempotency_keys"]
	return &lookupsBatch{l: l, ctx: ctx, tx: tx, t: t,
		claim: `INSERT INTO ` + keys + ` (stream, principal, key, method, path, order_id, claimed_at, expires_at,
		status, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (principal, key) DO UPDATE SET
		method = excluded.method, path = excluded.path, order_id = excluded.order_id, claimed_at = excluded.claimed_at,
		expires_at = excluded.expires_at,
		status = CASE WHEN expires_at = excluded.expires_at THEN coalesce(status, excluded.status) ELSE excluded.status END,
		completed_at = CASE WHEN expires_at = excluded.expires_at AND (status IS NOT NULL OR excluded.status IS NULL) THEN completed_at
			ELSE excluded.completed_at END`,
		// The first outcome stands, as in the key's stream.
		complete: `UPDATE ` + keys + ` SET status = ?, completed_at = ? WHERE stream = ? AND status IS NULL`,
		// Given up without an outcome (a 5xx): the key holds nothing to show.
		release: `DELETE FROM ` + keys + ` WHERE stream = ? AND status IS NULL`,
		ref: `INSERT OR IGNORE INTO ` + t["client_references"] + ` (principal, customer_id, client_reference, order_id)
			VALUES (?, ?, ?, ?)`,
	}
}

// apply applies e, whose outcome is o if it is a claim merged with its outcome.
func (b *lookupsBatch) apply(e eventstore.RecordedEvent, o keyOutcome) error {
	switch e.Type {
	case idempotency.TypeClaimed:
		return b.claimKey(e, o)
	case idempotency.TypeRecorded:
		return b.recordKey(e)
	case idempotency.TypeCompleted:
		if o.merged {
			return nil // written with its claim
		}
		c, err := decodeOutcome(e)
		if err != nil {
			return err
		}
		_, err = b.tx.ExecContext(b.ctx, b.complete, int64(c.Status), stamp(c.CompletedAt), e.Stream)
		return err
	case idempotency.TypeReleased:
		_, err := b.tx.ExecContext(b.ctx, b.release, e.Stream)
		return err
	}
	if lookupsOrderType(e.Type) {
		return b.lookupOrder(e)
	}
	if e.Type == providers.TypeUnapplied {
		var u providers.Unapplied
		if err := json.Unmarshal(e.Data, &u); err != nil {
			return err
		}
		return b.unapplied(e, u)
	}
	return nil
}

// unapplied lists a provider's event that was not applied, recorded by e.
func (b *lookupsBatch) unapplied(e eventstore.RecordedEvent, u providers.Unapplied) error {
	_, err := b.tx.ExecContext(b.ctx, `INSERT OR IGNORE INTO `+b.t["provider_events"]+` (position, provider, principal, event_id,
		event_type, order_id, reason, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		int64(e.Position.Commit), u.Provider, u.Principal, u.EventID, u.EventType, u.OrderID, u.Reason, stamp(u.ReceivedAt))
	return err
}

// keyOutcome is what the lookups keep of a key's outcome: the body and headers are skipped,
// not decoded.
type keyOutcome struct {
	Status      int       `json:"status"`
	CompletedAt time.Time `json:"completedAt"`
	merged      bool      // of a claim: the outcome that follows it; of an outcome: written with its claim
}

func decodeOutcome(e eventstore.RecordedEvent) (keyOutcome, error) {
	var c keyOutcome
	err := json.Unmarshal(e.Data, &c)
	return c, err
}

// claimOutcomes finds the claims of the batch that the next event of their key stream, in the
// batch, completes. It returns nil if there are none, else, by index in events, each such
// claim's outcome, and merged for the outcome itself.
func claimOutcomes(events []eventstore.RecordedEvent) ([]keyOutcome, error) {
	var out []keyOutcome
	var claims map[string]int // key stream → its claim, while it is the stream's last event
	for i, e := range events {
		switch e.Type {
		case idempotency.TypeClaimed:
			if claims == nil {
				claims = map[string]int{}
			}
			claims[e.Stream] = i
			continue
		case idempotency.TypeCompleted:
			c, ok := claims[e.Stream]
			if !ok {
				break
			}
			o, err := decodeOutcome(e)
			if err != nil {
				return nil, fmt.Errorf("%s@%d (%s): %w", e.Stream, e.Revision, e.Type, err)
			}
			if out == nil {
				out = make([]keyOutcome, len(events))
			}
			o.merged = true
			out[c], out[i] = o, keyOutcome{merged: true}
		}
		if claims != nil {
			delete(claims, e.Stream)
		}
	}
	return out, nil
}

// claimKey makes the key's row the claim's, with outcome o if it is merged. A takeover carries
// the first claim's expiry: it keeps the row's outcome, and o is written only if the row has
// none (the first outcome stands). A new life after expiry starts afresh: its outcome is o's,
// or none. These are what the claim and then the outcome's update would leave.
func (b *lookupsBatch) claimKey(e eventstore.RecordedEvent, o keyOutcome) error {
	var c idempotency.Claimed
	if err := json.Unmarshal(e.Data, &c); err != nil {
		return err
	}
	var status, completedAt any // NULL without an outcome
	if o.merged {
		status, completedAt = int64(o.Status), stamp(o.CompletedAt)
	}
	b.noteClaim(c.ClaimedAt)
	_, err := b.tx.ExecContext(b.ctx, b.claim, e.Stream, c.Principal, c.Key, c.Method, c.Path, c.OrderID, stamp(c.ClaimedAt), expiryStamp(c.ExpiresAt),
		status, completedAt)
	return err
}

func (b *lookupsBatch) noteClaim(at time.Time) {
	b.claimed++
	if at.After(b.newest) {
		b.newest = at
	}
}

// recordKey makes the key's row the claim and outcome of a Recorded event.
func (b *lookupsBatch) recordKey(e eventstore.RecordedEvent) error {
	var r struct {
		idempotency.Claimed
		Status int `json:"status"` // the outcome's body and headers are skipped, not decoded
	}
	if err := json.Unmarshal(e.Data, &r); err != nil {
		return err
	}
	b.noteClaim(r.ClaimedAt)
	_, err := b.tx.ExecContext(b.ctx, b.claim, e.Stream, r.Principal, r.Key, r.Method, r.Path, r.OrderID, stamp(r.ClaimedAt), expiryStamp(r.ExpiresAt),
		int64(r.Status), stamp(r.ClaimedAt))
	return err
}

// Applies reports whether Apply folds events of type typ: key events and the order events
// that name a client reference or a payment id.
func (Lookups) Applies(typ string) bool {
	switch typ {
	case idempotency.TypeClaimed, idempotency.TypeCompleted, idempotency.TypeRecorded, idempotency.TypeReleased, providers.TypeUnapplied:
		return true
	}
	return lookupsOrderType(typ)
}

// lookupsOrderType reports whether typ is an order event the lookups fold: every version of
// the three types, so that one this build cannot read stops the lookups instead of being skipped.
func lookupsOrderType(typ string) bool {
	return strings.HasPrefix(typ, "order.created.") || strings.HasPrefix(typ, "order.payment-started.") ||
		strings.HasPrefix(typ, "order.provider-event-unapplied.")
}

func (b *lookupsBatch) lookupOrder(e eventstore.RecordedEvent) error {
	ev, err := order.Unmarshal(e.Type, e.Data)
	if err != nil {
		return err
	}
	orderID := strings.TrimPrefix(e.Stream, orderStreams)
	switch ev := ev.(type) {
	case order.Created:
		if ev.ClientRef == "" {
			return nil
		}
		_, err = b.tx.ExecContext(b.ctx, b.ref, command.PrincipalOf(e.Metadata), ev.CustomerID, ev.ClientRef, orderID)
	case order.PaymentStarted:
		err = b.l.lookupPayment(b.ctx, b.tx, b.t, e, command.PrincipalOf(e.Metadata), ev.PaymentID, orderID)
	case order.ProviderEventUnapplied:
		err = b.unapplied(e, providers.Unapplied{Provider: ev.Provider, Principal: command.PrincipalOf(e.Metadata), EventID: ev.EventID,
			EventType: ev.Type, OrderID: orderID, Reason: ev.Reason, ReceivedAt: ev.At})
	}
	return err
}

// lookupPayment makes the payment id lead to orderID, unless it leads to an order already.
func (l Lookups) lookupPayment(ctx context.Context, tx *sql.Tx, t Tables, e eventstore.RecordedEvent, principal, paymentID, orderID string) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO `+t["payments"]+` (principal, payment_id, order_id) VALUES (?, ?, ?)
		ON CONFLICT (principal, payment_id) DO NOTHING`, principal, paymentID, orderID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var first string
	err = tx.QueryRowContext(ctx, `SELECT order_id FROM `+t["payments"]+` WHERE principal = ? AND payment_id = ?`,
		principal, paymentID).Scan(&first)
	if err != nil || first == orderID {
		return err // the order started its payment id again
	}
	log := l.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("payments lookup: a second order started a payment id; the lookup keeps the first",
		"principal", principal, "payment_id", paymentID, "order", first, "second_order", orderID,
		"stream", e.Stream, "revision", e.Revision)
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// expiryStamp is stamp with every digit of the nanoseconds, so that stamps sort as their times.
func expiryStamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00") }
