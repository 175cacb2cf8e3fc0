package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
)

// Plan is a keyed change of an endpoint planned, a registration or a rotation of its secret:
// the appends that make it, not made yet. Whoever makes them (the keyed pipeline, with
// the record of the request's Idempotency-Key) tells it what the store did (Written): it is
// then done, or planned again on the streams as the store holds them now.
type Plan struct {
	// Appends are the appends to make, all or nothing and in this order; none once done.
	Appends []eventstore.StreamAppend
	// Endpoint and Err are what the change came to, once done. Before, Endpoint is the
	// endpoint the appends make, but for its Start and Revision, which only the store tells.
	Endpoint Endpoint
	Err      error
	// Repeated is set when the change was made already, by an earlier request with the same
	// key whose record has expired or was never kept: nothing was written. A registration's
	// Err is then fault.KeyReused if that request asked for another endpoint.
	Repeated bool

	es     *Endpoints
	decide func(ctx context.Context) // reads the streams: the appends, or the end of the plan
	tries  int
	unlock func()
}

// maxPlanTries bounds the plans of one change whose streams keep changing.
const maxPlanTries = 20

// PlanRegistration plans the registration of endpoint id (EndpointID) for principal, holding
// this node's turn to register until Close, so that the registrations of one node do not race
// each other for slots. Check what it asks for first.
func (es *Endpoints) PlanRegistration(ctx context.Context, id, principal, rawURL string, events []string, description string) *Plan {
	es.registering.Lock()
	_, raw := NewSecret()
	now := es.Now().UTC()
	r := Registered{ID: id, Principal: principal, URL: rawURL, Events: events, Description: description,
		Secret: Secret{Sealed: es.Sealer.Seal(id, raw), CreatedAt: now}, At: now}
	p := &Plan{es: es, unlock: es.registering.Unlock}
	p.decide = func(ctx context.Context) { p.register(ctx, r) }
	if err := es.Refresh(ctx); err != nil {
		p.finish(err)
		return p
	}
	p.decide(ctx)
	return p
}

// PlanRotation plans the rotation of the signing secret of principal's endpoint id, with
// Idempotency-Key key; with all, principal sees every endpoint but rotates only its own: the
// secret is its owner's alone. The old secret signs beside the new one for 24 h.
func (es *Endpoints) PlanRotation(ctx context.Context, id, principal string, all bool, key string) *Plan {
	p := &Plan{es: es}
	p.decide = func(ctx context.Context) { p.rotate(ctx, id, principal, all, key) }
	p.decide(ctx)
	return p
}

// Next returns the appends to make, all or nothing; nil once the plan is done.
func (p *Plan) Next() []eventstore.StreamAppend { return p.Appends }

// Close gives up what the plan holds: a registration's turn.
func (p *Plan) Close() {
	if p.unlock != nil {
		p.unlock()
		p.unlock = nil
	}
}

// register plans registration r, or ends the plan: the endpoint is registered already.
func (p *Plan) register(ctx context.Context, r Registered) {
	es, id := p.es, r.ID
	for ; p.tries < maxPlanTries; p.tries++ {
		ep, found, err := es.Registered(ctx, id)
		switch {
		case err != nil:
			p.finish(err)
			return
		case found:
			p.Endpoint, p.Repeated = ep, true
			p.finish(ep.Repeats(r.Principal, r.URL, r.Events, r.Description))
			return
		}
		expected, err := es.registrationRevision(ctx, id)
		if errors.Is(err, errRegistered) {
			continue // registered since the read: read it
		}
		var claim []eventstore.StreamAppend
		if err == nil {
			claim, err = es.claim(ctx, r.Principal, id)
		}
		if err == nil {
			p.Appends, err = changeAppends(id, expected, TypeRegistered, r, claim...)
		}
		if err != nil {
			p.finish(err)
			return
		}
		p.Endpoint = Endpoint{}
		p.Endpoint.register(r)
		return
	}
	p.finish(fmt.Errorf("register webhook endpoint %s: %w", id, ErrContended))
}

// rotate plans a rotation of endpoint id's secret with key, or ends the plan: the rotation is
// made already, or the caller may not make it.
func (p *Plan) rotate(ctx context.Context, id, principal string, all bool, key string) {
	es := p.es
	if err := es.Reload(ctx, id); err != nil {
		p.finish(err)
		return
	}
	ep, err := es.Get(id, principal, all)
	switch {
	case err != nil:
		p.finish(err)
		return
	case ep.Principal != principal:
		p.finish(fmt.Errorf("%w: endpoint %s is %s's", ErrNotOwner, id, ep.Principal))
		return
	case ep.rotated(key):
		p.Endpoint, p.Repeated = ep, true
		p.finish(nil)
		return
	case p.tries >= maxPlanTries:
		p.finish(fmt.Errorf("rotate the secret of webhook endpoint %s: %w", id, ErrContended))
		return
	}
	_, raw := NewSecret()
	now := es.Now().UTC()
	r := SecretRotated{Secret: Secret{Sealed: es.Sealer.Seal(id, raw), CreatedAt: now}, Key: key, By: principal, At: now}
	if p.Appends, err = changeAppends(id, eventstore.Exact(ep.Revision), TypeSecretRotated, r); err != nil {
		p.finish(err)
		return
	}
	p.Endpoint = ep // a rotation changes nothing an endpoint's answer shows but its secret
}

// Written tells the plan what the store did with its appends: results, or the refusal err. A
// refusal of a stream the plan read (another change of the endpoint or of the principal's
// slots, or a retry of this one, came first) has it planned again.
func (p *Plan) Written(ctx context.Context, results []eventstore.AppendResult, err error) {
	switch {
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		p.tries++
		p.decide(ctx)
	case err != nil:
		p.finish(fmt.Errorf("change webhook endpoint %s: %w", p.Endpoint.ID, err))
	default:
		var err error
		p.Endpoint, _, err = p.es.Registered(ctx, p.Endpoint.ID)
		p.finish(err)
	}
}

func (p *Plan) finish(err error) {
	p.Appends, p.Err = nil, err
}

// changeAppends are the appends of a change of endpoint id: before (a registration's claim of
// its slot), event v of type typ in the endpoint's stream at expected, and the endpoint's name
// in the index.
func changeAppends(id string, expected eventstore.ExpectedRevision, typ string, v any, before ...eventstore.StreamAppend) ([]eventstore.StreamAppend, error) {
	ev, err := newEvent(typ, v)
	if err != nil {
		return nil, err
	}
	ix, err := newEvent(TypeIndexed, Indexed{ID: id})
	if err != nil {
		return nil, err
	}
	return append(before,
		eventstore.StreamAppend{Stream: endpointPrefix + id, Expected: expected, Events: []eventstore.EventData{ev}},
		eventstore.StreamAppend{Stream: indexStream, Expected: eventstore.Any, Events: []eventstore.EventData{ix}}), nil
}

// Repeats returns nil if a registration with these values would register ep, else
// fault.KeyReused: the key that ep's id derives from registered another endpoint.
func (ep Endpoint) Repeats(principal, rawURL string, events []string, description string) error {
	if ep.Principal != principal || ep.URL != rawURL || !slices.Equal(ep.Events, events) || ep.Description != description {
		return fmt.Errorf("%w: the key registered endpoint %s with other values", fault.KeyReused, ep.ID)
	}
	return nil
}

// rotated reports whether the endpoint's secret was rotated with Idempotency-Key key, among
// its latest rotations.
func (ep Endpoint) rotated(key string) bool {
	_, ok := ep.rotations[key]
	return ok
}

// Registered returns endpoint id as its streams hold it now; found is false if it is not
// registered.
func (es *Endpoints) Registered(ctx context.Context, id string) (ep Endpoint, found bool, err error) {
	if err := es.Reload(ctx, id); err != nil {
		return Endpoint{}, false, err
	}
	ep, found = es.lookup(id)
	return ep, found, nil
}
