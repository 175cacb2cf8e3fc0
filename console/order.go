package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/acme/orders/api"
	"github.com/acme/orders/audit"
	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/oklog/ulid/v2"
)

// timelinePage is how many events of an order a page of its timeline shows; the export has
// them all.
const timelinePage = 500

// errUnknownOrder: there is no such order, or it is another client's (which the API answers
// the same way).
var errUnknownOrder = errors.New("order not found")

// eventRow is a line of an order's timeline.
type eventRow struct {
	eventstore.RecordedEvent
	Meta      command.Metadata
	Duplicate *order.DuplicateChargeRecorded // the event, if it records a duplicate charge
	Unapplied *order.ProviderEventUnapplied  // the event, if it records a provider's event not applied
	Selected  bool                           // the page shows the state as of it
}

// chainStatus is the result of checking an order's hash chain.
type chainStatus struct {
	Checked  bool // the caller may see it
	Intact   bool
	Revision uint64 // where it breaks
	Type     string // of the event there
	Finding  audit.Finding
	Other    []audit.Finding // findings of the stream that are not of its chain
}

// stateAt is the order as of one event, and what that event changed.
type stateAt struct {
	Revision uint64
	Type     string
	State    order.State
	Changes  []audit.Change
}

type orderData struct {
	ID         string
	State      order.State
	Position   uint64
	Events     []eventRow
	From       uint64  // the first revision shown
	Next       *uint64 // the first revision of the next page of the timeline
	Chain      chainStatus
	Selected   *stateAt
	CanSelect  bool // the caller may see states as of an event
	Duplicates chargesPage
}

// chargesPage is a page of an order's duplicate charges: as many as the API's answer lists.
type chargesPage struct {
	Charges     []order.Charge
	First, Last int  // the numbers of the first and last shown, from 1
	Next        *int // the index of the first of the next page
	Previous    *int // of the previous page
}

// orderPage shows an order: its current state from the orders read model, its timeline from
// its stream, its chain checked as 'api audit verify' checks it, and, for ?event=N, the state
// as of event N folded as the API's /state folds it, with what N changed.
func (c *Console) orderPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	id := r.PathValue("id")
	d, err := c.order(ctx, v, id)
	if err == nil {
		d.From, _, err = numberParam(r, "from")
	}
	if err == nil {
		err = d.pageCharges(r)
	}
	if err == nil {
		err = c.timeline(ctx, &d)
	}
	if err == nil && d.CanSelect {
		if rev, ok, perr := numberParam(r, "event"); perr != nil {
			err = perr
		} else if ok {
			d.Selected, err = c.stateAt(ctx, id, rev)
			for i := range d.Events {
				d.Events[i].Selected = d.Events[i].Revision == rev
			}
		}
	}
	if err == nil && d.Chain.Checked {
		d.Chain, err = c.chain(ctx, id, d.Events)
	}
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, http.StatusOK, "order", "Order "+id, v, d)
}

// order reads the order's current state, for a caller the API would answer it to.
func (c *Console) order(ctx context.Context, v *visit, id string) (orderData, error) {
	d := orderData{ID: id}
	if _, err := ulid.ParseStrict(id); err != nil {
		return d, fmt.Errorf("%w: %s", errUnknownOrder, id)
	}
	if err := c.svc.CaughtUp(ctx, "orders"); err != nil {
		return d, err
	}
	row, ok, err := c.svc.Reads.Order(ctx, id)
	if err != nil {
		return d, err
	}
	if !ok || !v.caller.MayReadOrder(row.Principal) { // another's order looks like none
		return d, fmt.Errorf("%w: %s", errUnknownOrder, id)
	}
	d.State, d.Position = row.State, row.Position
	// States at past revisions and the hash chain are the audit's.
	d.CanSelect, d.Chain.Checked = v.caller.MayAudit(), v.caller.MayAudit()
	return d, nil
}

// pageCharges picks the page of duplicate charges from the query's charges (an index).
func (d *orderData) pageCharges(r *http.Request) error {
	from, _, err := numberParam(r, "charges")
	if err != nil {
		return err
	}
	n := d.State.DuplicateCharges.Len()
	start := int(min(from, uint64(n)))
	var p chargesPage
	i := 0
	for ch := range d.State.DuplicateCharges.All() {
		if i >= start+api.ShownCharges {
			break
		}
		if i >= start {
			p.Charges = append(p.Charges, ch)
		}
		i++
	}
	p.First, p.Last = start+1, start+len(p.Charges)
	if p.Last < n {
		p.Next = &p.Last
	}
	if start > 0 {
		prev := max(0, start-api.ShownCharges)
		p.Previous = &prev
	}
	d.Duplicates = p
	return nil
}

// mayRead returns nil if the caller may read order id, and errUnknownOrder if there is no such
// order or it is another principal's the caller may not read: the two look alike.
func (c *Console) mayRead(ctx context.Context, v *visit, id string) error {
	owner, found, err := c.svc.Orders.Owner(ctx, id)
	switch {
	case err != nil:
		return err
	case !found || !v.caller.MayReadOrder(owner):
		return fmt.Errorf("%w: %s", errUnknownOrder, id)
	}
	return nil
}

// timeline reads a page of the order's events from d.From.
func (c *Console) timeline(ctx context.Context, d *orderData) error {
	opts := eventstore.ReadStreamOptions{From: d.From, Limit: timelinePage + 1}
	for e, err := range c.svc.Orders.Events(ctx, d.ID, opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s", errUnknownOrder, d.ID)
		}
		if err != nil {
			return err
		}
		if len(d.Events) == timelinePage {
			d.Next = &e.Revision
			break
		}
		d.Events = append(d.Events, rowOf(e))
	}
	return nil
}

// rowOf is e as a line of the timeline, with the data of the events whose line shows more
// than their name.
func rowOf(e eventstore.RecordedEvent) eventRow {
	row := eventRow{RecordedEvent: e}
	// Metadata or data a tampered byte made unreadable shows as empty; the chain says why.
	_ = json.Unmarshal(e.Metadata, &row.Meta)
	ev, _ := order.Unmarshal(e.Type, e.Data)
	switch ev := ev.(type) {
	case order.DuplicateChargeRecorded:
		row.Duplicate = &ev
	case order.ProviderEventUnapplied:
		row.Unapplied = &ev
	}
	return row
}

// stateAt folds the order to revision rev and to the revision before, by command.Handler's
// LoadAt, as GET /v1/orders/{id}/state does.
func (c *Console) stateAt(ctx context.Context, id string, rev uint64) (*stateAt, error) {
	state, last, ok, err := c.svc.Orders.LoadAt(ctx, id, command.Point{Revision: &rev})
	switch {
	case err != nil:
		return nil, err
	case !ok || last < rev:
		return nil, fmt.Errorf("%w: order %s has no event at revision %d", errUnknownOrder, id, rev)
	}
	var before order.State
	if rev > 0 {
		prev := rev - 1
		if before, _, _, err = c.svc.Orders.LoadAt(ctx, id, command.Point{Revision: &prev}); err != nil {
			return nil, err
		}
	}
	s := &stateAt{Revision: rev, State: state}
	if s.Changes, err = changes(before, state); err != nil {
		return nil, err
	}
	for e, err := range c.svc.Orders.Events(ctx, id, eventstore.ReadStreamOptions{From: rev, Limit: 1}) {
		if err != nil {
			return nil, err
		}
		s.Type = e.Type
	}
	return s, nil
}

// changes lists what turned before into after, in the API's names and forms.
func changes(before, after order.State) ([]audit.Change, error) {
	b, err := api.OrderJSON(before)
	if err != nil {
		return nil, err
	}
	a, err := api.OrderJSON(after)
	if err != nil {
		return nil, err
	}
	return audit.JSONChanges(b, a)
}

// chain checks the order's stream as a verify of the log does (audit.CheckStream).
func (c *Console) chain(ctx context.Context, id string, shown []eventRow) (chainStatus, error) {
	findings, err := audit.CheckStream(ctx, c.svc.Orders.Events(ctx, id, eventstore.ReadStreamOptions{}))
	if err != nil {
		return chainStatus{}, err
	}
	st := chainStatus{Checked: true, Intact: true}
	for _, f := range findings {
		if !audit.Chain(f.Kind) || !st.Intact {
			st.Other = append(st.Other, f)
			continue
		}
		st.Intact, st.Revision, st.Finding = false, f.Revision, f
		for _, e := range shown {
			if e.Revision == f.Revision {
				st.Type = e.Type
			}
		}
	}
	return st, nil
}

// exportOrder writes the order's events as JSON lines, in the shape of 'api audit export'.
func (c *Console) exportOrder(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	id := r.PathValue("id")
	if _, err := ulid.ParseStrict(id); err != nil {
		c.fail(w, r, v, fmt.Errorf("%w: %s", errUnknownOrder, id))
		return
	}
	if err := c.mayRead(ctx, v, id); err != nil {
		c.fail(w, r, v, err)
		return
	}
	enc := json.NewEncoder(w)
	started := false
	for e, err := range c.svc.Orders.Events(ctx, id, eventstore.ReadStreamOptions{}) {
		if err != nil && !started {
			if errors.Is(err, eventstore.ErrStreamNotFound) {
				err = fmt.Errorf("%w: %s", errUnknownOrder, id)
			}
			c.fail(w, r, v, err)
			return
		}
		if err != nil {
			return // the status is sent; a cut export ends without its last line
		}
		if !started {
			w.Header().Set("Content-Type", "application/jsonl")
			w.Header().Set("Content-Disposition", `attachment; filename="order-`+id+`.jsonl"`)
			started = true
		}
		if enc.Encode(audit.LineOf(e)) != nil {
			return
		}
	}
}
