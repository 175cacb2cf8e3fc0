package webhooks

import (
	"context"

	"github.com/acme/orders/eventstore"
)

// register registers an endpoint of principal for key as the keyed pipeline does, but
// without the key's record: the plan's appends, until it is done.
func register(ctx context.Context, es *Endpoints, principal, key, rawURL string, events []string, description string) (Endpoint, error) {
	g := es.PlanRegistration(ctx, EndpointID(principal, key), principal, rawURL, events, description)
	defer g.Close()
	for appends := g.Next(); appends != nil; appends = g.Next() {
		results, err := eventstore.Write(ctx, es.Store, appends...)
		g.Written(ctx, results, err)
	}
	return g.Endpoint, g.Err
}

// Register is register, for the package's external tests.
var Register = register
