package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// Plan is a command decided on its order: the appends that make its effect, not made yet, or,
// once it is done, what the command came to. Whoever makes the appends (Handle, or a caller
// that writes something of its own in the same atomic step, such as the record of the
// command's idempotency key) tells the plan what the store did (Written): the plan is then done,
// or decided again on the order as the store holds it, within the retry budget, with new
// appends to make. A plan holds its order's turn in this process until Close.
type Plan struct {
	// Appends are the appends to make, all or nothing and in this order: what the command
	// claims (a client reference, a payment id), then the order's events. None once done.
	Appends []eventstore.StreamAppend
	// Result and Err are what the command came to, once done. Before, they are as decided: the
	// order after the events but for its Position, which only the store tells, and the refusal
	// the events record, if any.
	Result Result
	Err    error

	h          *Handler
	id, stream string
	c          order.Command
	md         Metadata
	opts       options
	retryUntil time.Time
	attempt    int
	leave      func()
	done       bool
	claimed    bool // what the command claims (see claim) is claimed for its order already

	// What the appends write: the order they were decided on, its events, and the claim.
	o      Order
	cached bool
	events []order.Event
	hash   string                   // the chain hash of the last event
	claim  *eventstore.StreamAppend // what the command claims, if anything
	keep   *cachedOrder             // the order after the append, to cache once Keep says so
}

// Plan decides c on the order id, with opts, and returns the plan; see Handle for what a
// command comes to. A create makes order id, whatever order its OrderID names. Close the plan when done with it.
func (h *Handler) Plan(ctx context.Context, id string, c order.Command, md Metadata, opts ...Option) *Plan {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	md.Command = c.CommandName()
	if create, ok := c.(order.CreateOrder); ok {
		create.OrderID = id // a create makes the order it is planned on
		c = create
	}
	p := &Plan{h: h, id: id, stream: StreamName(id), c: c, md: md, opts: o,
		retryUntil: time.Now().Add(cmp.Or(h.RetryFor, 2*time.Second))}
	leave, err := h.queues.enter(ctx, id)
	if err != nil {
		p.finish(Result{}, err)
		return p
	}
	p.leave = leave
	p.decide(ctx)
	return p
}

// Done reports whether the plan has nothing left to write: Result and Err are the command's.
func (p *Plan) Done() bool { return p.done }

// Next returns the appends to make, all or nothing; nil once the plan is done.
func (p *Plan) Next() []eventstore.StreamAppend { return p.Appends }

// Close gives the order's turn to the next command of this process.
func (p *Plan) Close() {
	if p.leave != nil {
		p.leave()
		p.leave = nil
	}
}

// Keep caches the order after a keyed command's append, once its key's outcome is kept by
// a claim no other request ran: then the events of its key are this run's. An unkeyed
// command's order, or one the store said it wrote, is cached at once.
func (p *Plan) Keep() {
	if p.keep != nil {
		p.h.cache(p.stream, *p.keep)
	}
}

func (p *Plan) finish(res Result, err error) {
	p.Appends, p.Result, p.Err, p.done = nil, res, err, true
}

// decide loads the order, decides and encodes the events, until there is something to append
// or the plan is done.
func (p *Plan) decide(ctx context.Context) {
	p.Appends = nil
	for !p.done && p.Appends == nil {
		p.attempt++
		if err := p.turn(ctx); err != nil {
			p.finish(Result{}, err)
		}
	}
}

// turn is one decision: it makes the appends, or ends the plan, or neither, when the cached
// order it decided on has moved (the next turn reads it).
func (p *Plan) turn(ctx context.Context) (err error) {
	h := p.h
	o, cached := Order{}, true // a new order, as if cached: checked by the store
	if !p.opts.isNew || p.attempt > 1 {
		if o, cached, err = h.current(ctx, p.id, p.md); err != nil {
			return err
		}
	}
	if o.State.Version > 0 && o.Owner != p.md.Principal {
		return fmt.Errorf("%s on order %s: %w", p.md.Command, p.id, ErrNotOwner)
	}
	if o.Key != nil {
		p.finish(repeated(p.id, o.Key, p.md))
		return nil
	}
	at := p.opts.at
	unmet := p.opts.cond && (o.State.Version == 0 || !slices.Contains(at, o.Revision()))
	var events []order.Event
	var decideErr error
	if !unmet {
		p.md.At = h.now()
		events, decideErr = order.Decide(o.State, order.InCurrency(p.c, o.State.Currency), p.md.At)
	}
	if len(events) == 0 {
		// An answer that appends nothing stands only on the order as it is in the store: a
		// cached one is checked first, and read again if it moved.
		if cached {
			same, err := h.unchanged(ctx, p.stream, o)
			if err != nil || !same {
				h.uncache(p.stream, o.State.Version)
				return err
			}
		}
		if unmet {
			return fmt.Errorf("%s on order %s: %w: want one of %v", p.md.Command, p.id, ErrPreconditionFailed, at)
		}
		p.finish(Result{State: o.State, Revision: o.Revision(), Position: o.Position}, decideErr)
		return nil
	}
	return p.encode(o, cached, events, decideErr)
}

// encode makes the appends of events decided on o: what the command claims, then the events
// with their metadata and hash chain.
func (p *Plan) encode(o Order, cached bool, events []order.Event, decideErr error) error {
	p.claim = nil
	if !p.claimed {
		var err error
		if p.claim, err = claim(p.id, p.c, p.md); err != nil {
			return err
		}
	}
	data := make([]eventstore.EventData, len(events))
	state := o.State
	prev := o.Hash
	if o.State.Version == 0 {
		prev = Genesis
	}
	for i, e := range events {
		typ, body, err := order.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode %T: %w", e, err)
		}
		meta, hash, err := chained(p.md, prev, p.stream, uint64(o.State.Version)+uint64(i), typ, body)
		if err != nil {
			return err
		}
		data[i] = eventstore.EventData{ID: eventID(p.md, p.id, p.stream, i), Type: typ, Data: body, Metadata: meta}
		state, prev = order.Evolve(state, e), hash
	}
	p.o, p.cached, p.events, p.hash = o, cached, events, prev
	p.Appends = nil
	if p.claim != nil {
		p.Appends = append(p.Appends, *p.claim)
	}
	p.Appends = append(p.Appends, eventstore.StreamAppend{Stream: p.stream, Expected: o.expected(), Events: data})
	p.Result = Result{State: state, Revision: uint64(state.Version) - 1, Events: events}
	p.Err = decideErr
	return nil
}

// Written tells the plan what the store did with its appends: results, one for each append in
// order, or the refusal err. A refusal of the order's stream has the command decided again on
// the order as it is now, within the retry budget (Appends are then new), of what it claims has
// it look at the claim's holder; any other ends the plan with err, as does any other error.
func (p *Plan) Written(ctx context.Context, results []eventstore.AppendResult, err error) {
	if err != nil {
		p.refused(ctx, err)
		return
	}
	written := results[len(results)-1]
	res := Result{State: p.Result.State, Revision: written.Revision, Position: written.Position, Events: p.events, hash: p.hash, fate: written.Fate}
	p.noteWritten(res)
	if err := p.check(ctx, res); err != nil {
		p.finish(Result{}, err)
	}
}

// refused handles a refused append; see Written.
func (p *Plan) refused(ctx context.Context, err error) {
	p.h.uncache(p.stream, p.o.State.Version)
	wrong := (*eventstore.WrongExpectedRevisionError)(nil)
	switch {
	case !errors.As(err, &wrong):
		p.finish(Result{}, err)
	case wrong.Stream == p.stream && time.Now().Before(p.retryUntil):
		if err := backoff(ctx, p.attempt); err != nil {
			p.finish(Result{}, err)
			return
		}
		p.decide(ctx)
	case wrong.Stream == p.stream:
		p.finish(Result{}, fmt.Errorf("%s on order %s after %d attempts: %w: %w", p.md.Command, p.id, p.attempt, ErrConflict, err))
	case p.claim != nil && wrong.Stream == p.claim.Stream:
		if err := p.h.claimHeld(ctx, p.id, p.c, p.claim.Stream); err != nil {
			p.finish(Result{}, err)
			return
		}
		p.claimed = true // a retried command
		p.decide(ctx)
	default:
		p.finish(Result{}, err) // an append along with the plan's: its maker's to handle
	}
}

// noteWritten caches the order after the append, if every key applied to it is known: at
// once if the append cannot have been another's (the command is unkeyed, or the store says it
// wrote the events), else only once its key is kept (Keep): no other run of its key could have
// appended the same events.
func (p *Plan) noteWritten(res Result) {
	h, o, md := p.h, p.o, p.md
	p.keep = nil
	var keys map[string]struct{}
	if r, ok := h.cached(p.stream); ok && r.order.State.Version == o.State.Version {
		keys = r.keys
	} else if o.State.Version == 0 {
		keys = map[string]struct{}{}
	}
	if keys == nil {
		h.uncache(p.stream, res.State.Version)
		return
	}
	owner := o.Owner
	if o.State.Version == 0 {
		owner = md.Principal
	}
	next := cachedOrder{order: Order{State: res.State, Position: res.Position, Hash: res.hash, Owner: owner}, keys: keys}.with(md)
	if md.IdempotencyKey == "" || res.fate == eventstore.FateWritten {
		// Random event ids, or the store's word: this append is no other's repeat, so the
		// order cached is the one stored.
		h.cache(p.stream, next)
		return
	}
	h.uncache(p.stream, o.State.Version)
	p.keep = &next
}

// check makes sure a keyed append wrote its events, and ends the plan, or decides the command
// again if the events it met are neither its own nor its key's. The store answers an
// append of event ids it already holds at that revision with the first append's result:
// decided on a cached order that missed them (another node, a key reused after it
// expired), or racing another run of the key (a takeover), this append may not be ours. The
// store says so if it can, else the stored events do; if they are another run's, the answer is
// theirs.
func (p *Plan) check(ctx context.Context, res Result) error {
	decideErr := p.Err
	if p.md.IdempotencyKey == "" || (!p.cached && res.fate != eventstore.FateRepeated) {
		p.finish(res, decideErr)
		return nil
	}
	mine, err := p.h.mine(ctx, p.stream, res)
	if err != nil {
		return err
	}
	if mine {
		res.fate = eventstore.FateWritten
		p.finish(res, decideErr)
		return nil
	}
	p.keep = nil
	p.h.uncache(p.stream, p.o.State.Version)
	stored, err := p.h.Load(ctx, p.id, p.md.Principal, p.md.IdempotencyKey)
	if err != nil {
		return err
	}
	if stored.Key != nil {
		p.finish(repeated(p.id, stored.Key, p.md))
	} else {
		p.decide(ctx)
	}
	return nil
}
