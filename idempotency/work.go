package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/providers"
	"github.com/acme/orders/webhooks"
)

// Work is a keyed write, as the pipeline runs it: an OrderCommand, or the Registration
// of a webhook endpoint. The pipeline plans it on its subject (the order or the endpoint that
// the key is claimed with), makes the plan's appends with the key's record, and renders what
// it came to with the work's Render.
type Work interface {
	// plan decides the work on subject; fresh: the subject was drawn for this very claim.
	plan(ctx context.Context, p *Pipeline, subject string, fresh bool) plan
	// find rebuilds the key's outcome from the subject's streams, if its effect is there.
	find(ctx context.Context, p *Pipeline, subject string) (*Outcome, error)
}

// plan is a Work decided, its appends not made yet.
type plan interface {
	// Next returns the appends to make, all or nothing; nil once the plan is done.
	Next() []eventstore.StreamAppend
	// Written tells the plan what the store did: it is then done, or decided again.
	Written(ctx context.Context, results []eventstore.AppendResult, err error)
	Close()
	// sure returns, before the appends are made, the outcome they make, where it is certain:
	// the appends are this work's if the store makes them at all. at names the event whose
	// log position is the outcome's.
	sure() (out Outcome, at At, ok bool)
	// ran is what the plan came to, once done; its answer is recorded, if the appends
	// recorded it (sure), but for its position, else rendered.
	ran(recorded *Outcome) ran
	// keep keeps what the plan wrote as known, once its key is kept by a claim no other
	// request ran (command.Plan.Keep).
	keep()
}

// OrderCommand is a command on an order, as the pipeline runs it on the order its key is
// claimed with: the request's, a create's id drawn by the intake (Request.OrderID), or, on a
// takeover, the first claim's.
type OrderCommand struct {
	Command  order.Command
	Metadata command.Metadata
	Options  []command.Option // command.At for If-Match
	// Create: the command creates its order, under an id drawn for it, so that a new claim's
	// plan needs no read of the order (command.NewOrder).
	Create bool
	// Render turns what the command on order orderID came to into the answer sent, stored and
	// replayed. It must be pure: it is called before the append, for the record of a key
	// written with a new order's events, and for an outcome rebuilt from the order's stream.
	Render func(orderID string, res command.Result, err error) Outcome
}

func (cmd OrderCommand) plan(ctx context.Context, p *Pipeline, orderID string, fresh bool) plan {
	opts := cmd.Options
	if cmd.Create && fresh {
		opts = append(opts[:len(opts):len(opts)], command.NewOrder())
	}
	return orderPlan{Plan: p.Orders.Plan(ctx, orderID, cmd.Command, cmd.Metadata, opts...), cmd: cmd, id: orderID}
}

func (cmd OrderCommand) find(ctx context.Context, p *Pipeline, orderID string) (*Outcome, error) {
	rep, err := p.Orders.Find(ctx, orderID, cmd.Command, cmd.Metadata)
	if err != nil || rep == nil {
		return nil, err
	}
	out := cmd.Render(orderID, rep.Result, rep.Err)
	return &out, nil
}

// orderPlan is a command.Plan as the pipeline carries it out.
type orderPlan struct {
	*command.Plan
	cmd OrderCommand
	id  string
}

// sure: a final answer (one that is kept). The events, written with the key's claim, are this
// run's: the claim is new, and the store refuses them should they repeat another append
// (eventstore.PartialRepeat).
func (o orderPlan) sure() (Outcome, At, bool) {
	if !fault.Final(o.Err) {
		return Outcome{}, At{}, false
	}
	own := o.Appends[len(o.Appends)-1]
	return o.cmd.Render(o.id, o.Result, o.Err), At{PositionStream: own.Stream, PositionRevision: o.Result.Revision}, true
}

func (o orderPlan) ran(recorded *Outcome) ran {
	var out Outcome
	if recorded != nil {
		out = *recorded
		out.Position = o.Result.Position.Commit // the one thing the store told since
	} else {
		out = o.cmd.Render(o.id, o.Result, o.Err)
	}
	return ran{out: out, err: o.Err, repeated: o.Result.Repeated, appended: len(o.Result.Events) > 0}
}

func (o orderPlan) keep() { o.Keep() }

// Registration is the registration of a webhook endpoint, as the pipeline runs it: its subject
// is the endpoint's id (webhooks.EndpointID of the key).
type Registration struct {
	Endpoints                   *webhooks.Endpoints
	Principal, URL, Description string
	Events                      []string
	Render                      RenderEndpoint
}

// Rotation is the rotation of a webhook endpoint's signing secret, as the pipeline runs it: its
// subject is the endpoint's id. With All, Principal sees every endpoint (but rotates only its
// own).
type Rotation struct {
	Endpoints *webhooks.Endpoints
	Principal string
	All       bool
	Key       string
	Render    RenderEndpoint
}

// RenderEndpoint turns what a change of an endpoint came to into the answer stored and
// replayed, which must not hold a secret (see webhooks.Endpoints.Shown). It must be pure.
type RenderEndpoint func(ep webhooks.Endpoint, err error) Outcome

func (reg Registration) plan(ctx context.Context, _ *Pipeline, id string, _ bool) plan {
	return endpointPlan{reg.Endpoints.PlanRegistration(ctx, id, reg.Principal, reg.URL, reg.Events, reg.Description), reg.Render}
}

// find: the endpoint registered is the key's effect.
func (reg Registration) find(ctx context.Context, _ *Pipeline, id string) (*Outcome, error) {
	ep, found, err := reg.Endpoints.Registered(ctx, id)
	if err != nil || !found {
		return nil, err
	}
	out := reg.Render(ep, ep.Repeats(reg.Principal, reg.URL, reg.Events, reg.Description))
	return &out, nil
}

func (rot Rotation) plan(ctx context.Context, _ *Pipeline, id string, _ bool) plan {
	return endpointPlan{rot.Endpoints.PlanRotation(ctx, id, rot.Principal, rot.All, rot.Key), rot.Render}
}

// find: the rotation is the key's effect if the endpoint records it.
func (rot Rotation) find(ctx context.Context, p *Pipeline, id string) (*Outcome, error) {
	g := rot.plan(ctx, p, id, false)
	defer g.Close()
	if res := g.ran(nil); res.repeated {
		return &res.out, nil
	}
	return nil, nil
}

// endpointPlan is a webhooks.Plan as the pipeline carries it out.
type endpointPlan struct {
	*webhooks.Plan
	render RenderEndpoint
}

// sure: the change is the key's (the endpoint's id derives from it, or the rotation records
// it), so it is this request's if it is written at all.
func (g endpointPlan) sure() (Outcome, At, bool) {
	return g.render(g.Endpoint, nil), At{}, true
}

func (g endpointPlan) ran(recorded *Outcome) ran {
	out := recorded
	if out == nil {
		r := g.render(g.Endpoint, g.Err)
		out = &r
	}
	changed := !g.Repeated && g.Err == nil
	return ran{out: *out, err: g.Err, repeated: g.Repeated, appended: changed}
}

func (g endpointPlan) keep() {}

// Unapplied is a provider's event recorded in the provider log rather than applied to an order
// (it names no order of its principal, or reports nothing the service acts on), as the
// pipeline runs it: the log's append (providers.LogAppend) is made with the key's record.
type Unapplied struct {
	Event providers.Unapplied
	// Render turns the record that stands into the answer stored and replayed. It must be pure.
	Render func(u providers.Unapplied, err error) Outcome
}

func (w Unapplied) plan(_ context.Context, p *Pipeline, _ string, _ bool) plan {
	a, err := providers.LogAppend(w.Event)
	g := &logPlan{w: w, store: p.Keys.Store, u: w.Event, err: err}
	if err == nil {
		g.next = []eventstore.StreamAppend{a}
	}
	return g
}

// find: the record in the provider log is the key's effect.
func (w Unapplied) find(ctx context.Context, p *Pipeline, _ string) (*Outcome, error) {
	e := w.Event
	u, found, err := providers.Recorded(ctx, p.Keys.Store, e.Principal, e.Provider, e.EventID)
	if err != nil || !found {
		return nil, err
	}
	out := w.Render(u, nil)
	return &out, nil
}

// logPlan is the provider log's append as the pipeline carries it out.
type logPlan struct {
	w        Unapplied
	store    eventstore.Store
	next     []eventstore.StreamAppend
	u        providers.Unapplied // the record that stands
	repeated bool                // the log held the event already
	err      error
}

func (g *logPlan) Next() []eventstore.StreamAppend { return g.next }

// Written: a refusal is the log's stream existing: the first record stands.
func (g *logPlan) Written(ctx context.Context, _ []eventstore.AppendResult, err error) {
	g.next = nil
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		e := g.w.Event
		var found bool
		g.u, found, err = providers.Recorded(ctx, g.store, e.Principal, e.Provider, e.EventID)
		if err == nil && !found {
			err = fmt.Errorf("provider log of %s event %s: refused as existing, read as missing", e.Provider, e.EventID)
		}
		g.repeated = err == nil
	}
	g.err = err
}

func (g *logPlan) Close() {}

// sure: the log's stream is written only if it does not exist, so a record written is this one.
func (g *logPlan) sure() (Outcome, At, bool) { return g.w.Render(g.u, nil), At{}, true }

func (g *logPlan) ran(recorded *Outcome) ran {
	out := recorded
	if out == nil {
		r := g.w.Render(g.u, g.err)
		out = &r
	}
	written := !g.repeated && g.err == nil
	return ran{out: *out, err: g.err, repeated: g.repeated, appended: written}
}

func (g *logPlan) keep() {}
