package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
)

// Registration is an endpoint's registration planned: the appends that make it (the claim of
// its slot, the registration, its name in the index), not made yet. Whoever makes them (the
// idempotency pipeline, with the record of the request's key) tells it what the store did
// (Written): it is then done, or planned again on the streams as the store holds them now. It
// holds this node's turn to register until Close, so that the registrations of one node do not
// race each other for slots.
type Registration struct {
	// Appends are the appends to make, all or nothing and in this order; none once done.
	Appends []eventstore.StreamAppend
	// Endpoint and Err are what the registration came to, once done. Before, Endpoint is the
	// endpoint the appends register, but for its Start, which only the store tells.
	Endpoint Endpoint
	Err      error
	// Repeated is set when the endpoint was registered already: by an earlier request with the
	// same key, whose record has expired or which an earlier release did not keep. Nothing was
	// written; Err is fault.KeyReused if that request asked for another endpoint.
	Repeated bool

	es     *Endpoints
	r      Registered
	tries  int
	done   bool
	unlock func()
}

// maxRegistrationTries bounds the plans of one registration whose streams keep changing.
const maxRegistrationTries = 20

// PlanRegistration plans the registration of endpoint id (EndpointID) for principal; Check
// what it asks for first. Close the plan when done with it.
func (es *Endpoints) PlanRegistration(ctx context.Context, id, principal, rawURL string, events []string, description string) *Registration {
	es.registering.Lock()
	_, raw := NewSecret()
	now := es.Now().UTC()
	g := &Registration{es: es, unlock: es.registering.Unlock, r: Registered{ID: id, Principal: principal, URL: rawURL,
		Events: events, Description: description, Secret: Secret{Sealed: es.Sealer.Seal(id, raw), CreatedAt: now}, At: now}}
	if err := es.Refresh(ctx); err != nil {
		g.finish(err)
		return g
	}
	g.plan(ctx)
	return g
}

// Done reports whether the registration has nothing left to write.
func (g *Registration) Done() bool { return g.done }

// Close gives this node's turn to register to the next registration.
func (g *Registration) Close() {
	if g.unlock != nil {
		g.unlock()
		g.unlock = nil
	}
}

// plan reads the endpoint's streams and makes the appends, or ends the registration: the
// endpoint is registered already, or its streams kept changing.
func (g *Registration) plan(ctx context.Context) {
	es, id := g.es, g.r.ID
	for ; g.tries < maxRegistrationTries; g.tries++ {
		ep, found, err := es.Registered(ctx, id)
		if err != nil {
			g.finish(err)
			return
		}
		if found {
			g.repeat(ep)
			return
		}
		expected, err := es.registrationRevision(ctx, id)
		if errors.Is(err, errRegistered) {
			continue // registered since the read: read it
		}
		var claim []eventstore.StreamAppend
		if err == nil {
			claim, err = es.claim(ctx, g.r.Principal, id)
		}
		var ev, ix eventstore.EventData
		if err == nil {
			ev, err = newEvent(TypeRegistered, g.r)
		}
		if err == nil {
			ix, err = newEvent(TypeIndexed, Indexed{ID: id})
		}
		if err != nil {
			g.finish(err)
			return
		}
		g.Appends = append(claim,
			eventstore.StreamAppend{Stream: endpointPrefix + id, Expected: expected, Events: []eventstore.EventData{ev}},
			eventstore.StreamAppend{Stream: indexStream, Expected: eventstore.Any, Events: []eventstore.EventData{ix}})
		g.Endpoint = Endpoint{}
		g.Endpoint.register(g.r)
		return
	}
	g.finish(fmt.Errorf("register webhook endpoint %s: %w", id, ErrContended))
}

// Written tells the registration what the store did with its appends: results, or the
// refusal err. A refusal of its slot or its endpoint's stream (another registration of the
// principal, or a retry of this one, came first) has it planned again.
func (g *Registration) Written(ctx context.Context, results []eventstore.AppendResult, err error) {
	switch {
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		g.tries++
		g.plan(ctx)
	case err != nil:
		g.finish(fmt.Errorf("register webhook endpoint %s: %w", g.r.ID, err))
	default:
		var err error
		g.Endpoint, _, err = g.es.Registered(ctx, g.r.ID)
		g.finish(err)
	}
}

// repeat ends a registration whose endpoint exists: the same endpoint, or fault.KeyReused.
func (g *Registration) repeat(ep Endpoint) {
	r := g.r
	if err := ep.Repeats(r.Principal, r.URL, r.Events, r.Description); err != nil {
		g.finish(err)
		return
	}
	g.Endpoint, g.Repeated = ep, true
	g.finish(nil)
}

// Repeats returns nil if a registration with these values would register ep, else
// fault.KeyReused: the key that ep's id derives from registered another endpoint.
func (ep Endpoint) Repeats(principal, rawURL string, events []string, description string) error {
	if ep.Principal != principal || ep.URL != rawURL || !slices.Equal(ep.Events, events) || ep.Description != description {
		return fmt.Errorf("%w: the key registered endpoint %s with other values", fault.KeyReused, ep.ID)
	}
	return nil
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

func (g *Registration) finish(err error) {
	g.Appends, g.Err, g.done = nil, err, true
}
