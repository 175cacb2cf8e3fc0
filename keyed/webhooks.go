package keyed

import (
	"context"

	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/webhooks"
)

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
type RenderEndpoint func(ep webhooks.Endpoint, err error) idempotency.Outcome

func (reg Registration) plan(ctx context.Context, _ *Pipeline, id string, _ bool) plan {
	return endpointPlan{reg.Endpoints.PlanRegistration(ctx, id, reg.Principal, reg.URL, reg.Events, reg.Description), reg.Render}
}

func (rot Rotation) plan(ctx context.Context, _ *Pipeline, id string, _ bool) plan {
	return endpointPlan{rot.Endpoints.PlanRotation(ctx, id, rot.Principal, rot.All, rot.Key), rot.Render}
}

// endpointPlan is a webhooks.Plan as the pipeline carries it out. The change is the key's (the
// endpoint's id derives from it, or the rotation records it), so it is this request's if it is
// written at all.
type endpointPlan struct {
	*webhooks.Plan
	render RenderEndpoint
}

func (g endpointPlan) answer() ran {
	return ran{out: g.render(g.Endpoint, g.Err), err: g.Err, repeated: g.Repeated, appended: !g.Repeated && g.Err == nil}
}

func (g endpointPlan) at() idempotency.At { return idempotency.At{} }
func (g endpointPlan) position() uint64   { return 0 }
func (g endpointPlan) keep()              {}
