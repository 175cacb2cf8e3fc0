package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
)

// lookups is what the order streams say the payments and client-references lookups hold, by
// the rules of their projection (projections.Lookups): a payment id leads to the last order
// that started a payment with it, a client reference to the first order created with it.
type lookups struct {
	at       eventstore.Position // the lookups' checkpoint; zero: they are caught up
	payments map[paymentKey]mapped
	refs     map[refKey]mapped
}

type paymentKey struct{ principal, paymentID string }

type refKey struct{ principal, customerID, ref string }

// mapped is the order a lookup leads to, and the event that decided it.
type mapped struct {
	stream   string
	revision uint64
	// late: an event after the checkpoint changed or could have changed it, so the lookup
	// may lag (or be ahead of the checkpoint read at the start): it is not compared.
	late bool
}

func newLookups(at eventstore.Position) *lookups {
	return &lookups{at: at, payments: map[paymentKey]mapped{}, refs: map[refKey]mapped{}}
}

// note takes in the order event e, decoded as ev (nil if it did not decode).
func (l *lookups) note(e eventstore.RecordedEvent, ev order.Event) {
	late := l.at != (eventstore.Position{}) && e.Position.Compare(l.at) > 0
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
		l.payments[k] = mapped{stream: e.Stream, revision: e.Revision, late: late || l.payments[k].late}
	}
}

// principalOf is the principal in an order event's metadata, as the projection reads it.
func principalOf(e eventstore.RecordedEvent) string {
	var md struct {
		Principal string `json:"principal"`
	}
	json.Unmarshal(e.Metadata, &md)
	return md.Principal
}

// drift compares every row of the two lookups with what the log says.
func (l *lookups) drift(ctx context.Context, q *projections.Queries) ([]Finding, int, error) {
	payments, err := q.Payments(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read the payments lookup: %w", err)
	}
	refs, err := q.ClientReferences(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read the client-references lookup: %w", err)
	}
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
	return out, len(payments) + len(refs), nil
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
