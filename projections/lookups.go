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
	"github.com/acme/orders/idempotency"
	json "github.com/goccy/go-json"
)

// Lookups is the key lookups read model: idempotency key → outcome summary, payment id →
// order, and (customer, client reference) → order, each per principal: clients choose their
// keys, payment ids, customer ids and references themselves, so two clients' are unrelated.
type Lookups struct{}

var _ Projection = Lookups{}

func (Lookups) Name() string { return "lookups" }

// Version 2 keys payments and client references by principal too; version 1 had one row per
// payment id, and per customer and reference, across principals.
func (Lookups) Version() int { return 2 }

func (Lookups) Filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{idempotency.StreamPrefix, command.StreamName("")}}
}

func (Lookups) Tables() []string {
	return []string{"idempotency_keys", "payments", "client_references"}
}

func (Lookups) Create(ctx context.Context, tx *sql.Tx, t Tables) error {
	_, err := tx.ExecContext(ctx, strings.NewReplacer(
		"{keys}", t["idempotency_keys"], "{payments}", t["payments"], "{refs}", t["client_references"]).Replace(`
		CREATE TABLE {keys} (
			stream       TEXT NOT NULL UNIQUE, -- the key's stream, which hashes principal and key
			principal    TEXT NOT NULL,
			key          TEXT NOT NULL,
			method       TEXT NOT NULL,
			path         TEXT NOT NULL,
			order_id     TEXT NOT NULL,
			status       INTEGER,          -- the outcome's status; NULL while in flight
			claimed_at   TEXT NOT NULL,
			completed_at TEXT,
			expires_at   TEXT NOT NULL,
			PRIMARY KEY (principal, key)
		) STRICT;
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
		) STRICT;`))
	return err
}

func (Lookups) Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error {
	for _, e := range events {
		var err error
		switch e.Type {
		case idempotency.TypeClaimed:
			var c idempotency.Claimed
			if err = json.Unmarshal(e.Data, &c); err == nil {
				// A takeover carries the first claim's expiry; a new life after expiry starts
				// afresh: either way the row becomes this claim's, without an outcome.
				_, err = tx.ExecContext(ctx, `INSERT INTO `+t["idempotency_keys"]+` (stream, principal, key, method, path, order_id, claimed_at, expires_at)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (principal, key) DO UPDATE SET
					method = excluded.method, path = excluded.path, order_id = excluded.order_id, claimed_at = excluded.claimed_at,
					expires_at = excluded.expires_at,
					status = CASE WHEN expires_at = excluded.expires_at THEN status END,
					completed_at = CASE WHEN expires_at = excluded.expires_at THEN completed_at END`,
					e.Stream, c.Principal, c.Key, c.Method, c.Path, c.OrderID, stamp(c.ClaimedAt), stamp(c.ExpiresAt))
			}
		case idempotency.TypeCompleted:
			// Only what the row keeps: the outcome's body and headers are skipped, not decoded.
			var c struct {
				Status      int       `json:"status"`
				CompletedAt time.Time `json:"completedAt"`
			}
			if err = json.Unmarshal(e.Data, &c); err == nil {
				// The first outcome stands, as in the key's stream.
				_, err = tx.ExecContext(ctx, `UPDATE `+t["idempotency_keys"]+` SET status = ?, completed_at = ?
					WHERE stream = ? AND status IS NULL`, c.Status, stamp(c.CompletedAt), e.Stream)
			}
		case idempotency.TypeReleased:
			// Given up without an outcome (a 5xx): the key holds nothing to show.
			_, err = tx.ExecContext(ctx, `DELETE FROM `+t["idempotency_keys"]+` WHERE stream = ? AND status IS NULL`, e.Stream)
		case "order.created.v1", "order.payment-started.v1":
			err = lookupOrder(ctx, tx, t, e)
		}
		if err != nil {
			return fmt.Errorf("%s@%d (%s): %w", e.Stream, e.Revision, e.Type, err)
		}
	}
	return nil
}

func lookupOrder(ctx context.Context, tx *sql.Tx, t Tables, e eventstore.RecordedEvent) error {
	ev, err := order.Unmarshal(e.Type, e.Data)
	if err != nil {
		return err
	}
	orderID := strings.TrimPrefix(e.Stream, command.StreamName(""))
	switch ev := ev.(type) {
	case order.Created:
		if ev.ClientRef == "" {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO `+t["client_references"]+` (principal, customer_id, client_reference, order_id)
			VALUES (?, ?, ?, ?)`, principalOf(e), ev.CustomerID, ev.ClientRef, orderID)
	case order.PaymentStarted:
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO `+t["payments"]+` (principal, payment_id, order_id) VALUES (?, ?, ?)`,
			principalOf(e), ev.PaymentID, orderID)
	}
	return err
}

// principalOf is the principal in an order event's metadata. Metadata that does not decode
// names none, as in the orders read model: its rows then answer no one.
func principalOf(e eventstore.RecordedEvent) string {
	var md command.Metadata
	json.Unmarshal(e.Metadata, &md)
	return md.Principal
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
