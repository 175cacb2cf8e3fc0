package audit

import (
	"fmt"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
	json "github.com/goccy/go-json"
)

// lookups is what the log says the lookups hold, by the rules of their projection
// (projections.Lookups): a payment id leads to the first order that started a payment with
// it, a client reference to the first order created with it, and a key to its latest claim
// with the first outcome recorded since its life began.
type lookups struct {
	rows     projections.LookupRows // as of their checkpoint, rows.At
	payments map[paymentKey]mapped
	refs     map[refKey]mapped
	keys     map[keyID]*keyRow
	byStream map[string]keyID // the key of each key stream, from its claims
	newest   time.Time        // the latest claim's time: the lookups forget keys long expired before it
}

type keyID struct{ principal, key string }

// keyRow is the row a key stream makes, and where its events stand.
type keyRow struct {
	row      projections.KeyRow
	stream   string
	revision uint64 // of the stream's last event read
	gone     bool   // released without an outcome: the projection deleted the row
	late     bool   // see mapped
}

type paymentKey struct{ principal, paymentID string }

type refKey struct{ principal, customerID, ref string }

// mapped is the order a lookup leads to, and the event that decided it.
type mapped struct {
	stream   string
	revision uint64
	// late: an event after the checkpoint changed or could have changed it, which the rows
	// do not hold yet: it is not compared.
	late bool
}

func newLookups(rows projections.LookupRows) *lookups {
	return &lookups{rows: rows, payments: map[paymentKey]mapped{}, refs: map[refKey]mapped{},
		keys: map[keyID]*keyRow{}, byStream: map[string]keyID{}}
}

// after reports whether e comes after the checkpoint.
func (l *lookups) after(e eventstore.RecordedEvent) bool {
	return e.Position.Compare(l.rows.At) > 0
}

// noteKey takes in the event e of a key stream. Events that do not decode leave the row as it
// was, as they would fail the projection.
func (l *lookups) noteKey(e eventstore.RecordedEvent) {
	switch e.Type {
	case idempotency.TypeClaimed, idempotency.TypeRecorded:
		var c idempotency.Recorded // a claim alone decodes with no outcome (Status 0)
		if json.Unmarshal(e.Data, &c) != nil {
			return
		}
		k := keyID{c.Principal, c.Key}
		l.byStream[e.Stream] = k
		if c.ClaimedAt.After(l.newest) {
			l.newest = c.ClaimedAt
		}
		r := l.keys[k]
		if r == nil || r.gone || !r.row.ExpiresAt.Equal(c.ExpiresAt) {
			// A new row, or a new life of the key: no outcome yet. A takeover carries the
			// first claim's expiry and keeps the outcome, if any.
			r = &keyRow{late: r != nil && r.late}
			l.keys[k] = r
		}
		status, completed := r.row.Status, r.row.CompletedAt
		if e.Type == idempotency.TypeRecorded && status == 0 {
			status, completed = c.Status, c.ClaimedAt // the first outcome stands
		}
		r.row = projections.KeyRow{Principal: c.Principal, Key: c.Key, Method: c.Method, Path: c.Path, OrderID: c.OrderID,
			Status: status, ClaimedAt: c.ClaimedAt, CompletedAt: completed, ExpiresAt: c.ExpiresAt}
	case idempotency.TypeCompleted:
		r := l.keys[l.byStream[e.Stream]]
		var c struct {
			Status      int       `json:"status"`
			CompletedAt time.Time `json:"completedAt"`
		}
		if r == nil || json.Unmarshal(e.Data, &c) != nil {
			return
		}
		if !r.gone && r.row.Status == 0 {
			r.row.Status, r.row.CompletedAt = c.Status, c.CompletedAt
		}
	case idempotency.TypeReleased:
		if r := l.keys[l.byStream[e.Stream]]; r != nil && r.row.Status == 0 {
			r.gone = true
		}
	default:
		return
	}
	if r := l.keys[l.byStream[e.Stream]]; r != nil {
		r.stream, r.revision, r.late = e.Stream, e.Revision, r.late || l.after(e)
	}
}

// note takes in the order event e, decoded as ev (nil if it did not decode).
func (l *lookups) note(e eventstore.RecordedEvent, ev order.Event) {
	late := l.after(e)
	switch ev := ev.(type) {
	case order.Created:
		if ev.ClientRef == "" {
			return
		}
		k := refKey{principalOf(e), ev.CustomerID, ev.ClientRef}
		if _, ok := l.refs[k]; !ok { // the first stands
			l.refs[k] = mapped{stream: e.Stream, revision: e.Revision, late: late}
		}
	case order.PaymentStarted:
		k := paymentKey{principalOf(e), ev.PaymentID}
		if _, ok := l.payments[k]; !ok { // the first stands
			l.payments[k] = mapped{stream: e.Stream, revision: e.Revision, late: late}
		}
	}
}

// principalOf is the principal in an order event's metadata, read as the projection reads it
// but not with its code: the check stands apart from what it checks.
func principalOf(e eventstore.RecordedEvent) string {
	var md struct {
		Principal string `json:"principal"`
	}
	json.Unmarshal(e.Metadata, &md)
	return md.Principal
}

// drift compares every row of the lookups with what the log says, and returns how many rows
// it compared.
func (l *lookups) drift() ([]Finding, int) {
	payments, refs, keys := l.rows.Payments, l.rows.ClientReferences, l.rows.Keys
	var out []Finding
	for _, r := range payments {
		what := fmt.Sprintf("the payments lookup: payment %q of principal %q", r.PaymentID, r.Principal)
		out = append(out, compare(l.payments, paymentKey{r.Principal, r.PaymentID}, r.OrderID, what)...)
	}
	out = append(out, missing(l.payments, func(k paymentKey) string {
		return fmt.Sprintf("the payments lookup has no row for payment %q of principal %q", k.paymentID, k.principal)
	})...)
	for _, r := range refs {
		what := fmt.Sprintf("the client-references lookup: reference %q of customer %q of principal %q", r.ClientReference, r.CustomerID, r.Principal)
		out = append(out, compare(l.refs, refKey{r.Principal, r.CustomerID, r.ClientReference}, r.OrderID, what)...)
	}
	out = append(out, missing(l.refs, func(k refKey) string {
		return fmt.Sprintf("the client-references lookup has no row for reference %q of customer %q of principal %q", k.ref, k.customerID, k.principal)
	})...)
	now := time.Now()
	for _, row := range keys {
		k := keyID{row.Principal, row.Key}
		r := l.keys[k]
		delete(l.keys, k)
		switch {
		case r == nil:
			// The store deletes the stream of a key that expired, and the projection keeps
			// its last row: it holds nothing a client can use any more.
			if row.ExpiresAt.After(now) {
				out = append(out, Finding{Kind: KindDrift, Stream: idempotency.StreamName(row.Principal, row.Key),
					Detail: fmt.Sprintf("the idempotency-keys lookup has key %q of principal %q, unexpired, but the log holds no claim of it", row.Key, row.Principal)})
			}
		case r.gone:
			if !r.late {
				out = append(out, Finding{Kind: KindDrift, Stream: r.stream, Revision: r.revision,
					Detail: fmt.Sprintf("the idempotency-keys lookup has key %q of principal %q, which was released without an outcome", row.Key, row.Principal)})
			}
		case !r.late && !sameKeyRow(r.row, row):
			out = append(out, Finding{Kind: KindDrift, Stream: r.stream, Revision: r.revision,
				Detail: fmt.Sprintf("the idempotency-keys lookup's row of key %q of principal %q differs from its stream: %s", row.Key, row.Principal, fieldDiff(r.row, row))})
		}
	}
	forgotten := l.newest.Add(-projections.KeyRowsKept) // rows of keys expired before it may be gone
	for k, r := range l.keys {
		if !r.gone && !r.late && !r.row.ExpiresAt.Before(forgotten) {
			out = append(out, Finding{Kind: KindDrift, Stream: r.stream, Revision: r.revision,
				Detail: fmt.Sprintf("the idempotency-keys lookup has no row for key %q of principal %q", k.key, k.principal)})
		}
	}
	return out, len(payments) + len(refs) + len(keys)
}

// compare checks a lookup row that leads to orderID against want, and marks its key seen by
// deleting it: what is left in want after all rows has no row.
func compare[K comparable](want map[K]mapped, k K, orderID, what string) []Finding {
	m, ok := want[k]
	delete(want, k)
	found := command.StreamName(orderID)
	switch {
	case !ok:
		return []Finding{{Kind: KindDrift, Stream: found, Detail: what + " leads to this order, but no event of the log made it"}}
	case m.late || m.stream == found:
		return nil
	}
	return []Finding{{Kind: KindDrift, Stream: m.stream, Revision: m.revision, Expected: m.stream, Found: found,
		Detail: what + " leads to another order than the log's"}}
}

// missing reports each key left in want that is not late.
func missing[K comparable](want map[K]mapped, describe func(K) string) []Finding {
	var out []Finding
	for k, m := range want {
		if !m.late {
			out = append(out, Finding{Kind: KindDrift, Stream: m.stream, Revision: m.revision, Detail: describe(k)})
		}
	}
	return out
}

// sameKeyRow is fieldDiff(a, b) == "" for key rows, at a fraction of its cost: a log holds
// millions.
func sameKeyRow(a, b projections.KeyRow) bool {
	return a.Principal == b.Principal && a.Key == b.Key && a.Method == b.Method && a.Path == b.Path &&
		a.OrderID == b.OrderID && a.Status == b.Status && a.ClaimedAt.Equal(b.ClaimedAt) &&
		a.CompletedAt.Equal(b.CompletedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}
