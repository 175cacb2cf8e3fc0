package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/acme/orders/access"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/labstack/echo/v4"
)

// errForbidden: none of the caller's roles is one the route allows.
var errForbidden = access.ErrForbidden

// rule is who may call a route.
type rule struct {
	roles access.Roles // any one of them suffices
	// ownOrder: a caller holding no role that reads any order (auditor, admin) reaches only
	// its own order at the path's :id; another principal's is answered as if it did not exist.
	ownOrder bool
}

const (
	clients = access.RoleClient
	readers = access.RoleClient | access.RoleAuditor | access.RoleAdmin
	audit   = access.RoleAuditor | access.RoleAdmin
	admins  = access.RoleAdmin
)

// routeAccess is the authorization table: "METHOD /route/:param" → who may call it. Routes
// without authentication (/healthz, /readyz, /openapi.yaml, /problems/{code}, and the
// deliveries of payment providers, which sign them) are not in it.
//
// Commands are the clients'; a command on another principal's order is answered as if the
// order did not exist (see Server.run). A client's listing has only its own orders, and its
// idempotency keys are its own by construction (they are scoped to the principal).
var routeAccess = map[string]rule{
	"POST /v1/orders":                                 {roles: clients},
	"GET /v1/orders":                                  {roles: readers},
	"GET /v1/orders/:id":                              {roles: readers, ownOrder: true},
	"GET /v1/orders/:id/events":                       {roles: readers, ownOrder: true},
	"GET /v1/orders/:id/state":                        {roles: audit},
	"POST /v1/orders/:id/lines":                       {roles: clients},
	"PUT /v1/orders/:id/lines/:sku":                   {roles: clients},
	"DELETE /v1/orders/:id/lines/:sku":                {roles: clients},
	"POST /v1/orders/:id/payments":                    {roles: clients},
	"POST /v1/orders/:id/payments/:paymentId/confirm": {roles: clients},
	"POST /v1/orders/:id/payments/:paymentId/fail":    {roles: clients},
	"POST /v1/orders/:id/cancel":                      {roles: clients},
	"POST /v1/orders/:id/shipments":                   {roles: clients},
	"POST /v1/orders/:id/refunds":                     {roles: clients},
	"POST /v1/orders/:id/refunds/:refundId/complete":  {roles: clients},
	"POST /v1/payments/:paymentId/confirm":            {roles: clients},
	"GET /v1/idempotency-keys/:key":                   {roles: clients},
	"GET /v1/reports/sales":                           {roles: audit},
	"GET /v1/provider-events":                         {roles: audit},
	"GET /admin/projections":                          {roles: admins},
	"POST /admin/projections/:name/rebuild":           {roles: admins},
	"GET /metrics":                                    {roles: admins},

	// Webhook endpoints: a client's own (another's is 404); auditors and admins read all,
	// admins change all. Only a client registers: an endpoint receives its principal's orders.
	"POST /v1/webhook-endpoints":                                  {roles: clients},
	"GET /v1/webhook-endpoints":                                   {roles: readers},
	"GET /v1/webhook-endpoints/:id":                               {roles: readers},
	"DELETE /v1/webhook-endpoints/:id":                            {roles: clients | admins},
	"POST /v1/webhook-endpoints/:id/disable":                      {roles: clients | admins},
	"POST /v1/webhook-endpoints/:id/enable":                       {roles: clients | admins},
	"POST /v1/webhook-endpoints/:id/rotate-secret":                {roles: clients | admins},
	"GET /v1/webhook-endpoints/:id/deliveries":                    {roles: readers},
	"POST /v1/webhook-endpoints/:id/deliveries/:deliveryId/retry": {roles: clients | admins},
}

// ruleFor returns the rule of the route of method and path (an echo route path). A route that
// authenticates but is not in the table is refused to every role.
func ruleFor(method, path string) (rule, bool) {
	if method == http.MethodHead {
		method = http.MethodGet // the same answer without its body
	}
	r, ok := routeAccess[method+" "+path]
	return r, ok
}

// authorize checks the authenticated caller against the rule of the request's route. A
// client's request on another principal's order is answered as one on an order that does not
// exist.
func (s *Server) authorize(c echo.Context) error {
	caller, method, route := callerOf(c), c.Request().Method, c.Path()
	r, ok := ruleFor(method, route)
	if !ok || !caller.Roles.Has(r.roles) {
		return fmt.Errorf("%w: %s %s needs one of the roles %s; the key has %s",
			errForbidden, method, route, r.roles, orNone(caller.Roles))
	}
	if !r.ownOrder || caller.MayReadAnyOrder() {
		return nil
	}
	id, err := pathValue(c, "id")
	if err != nil {
		return err
	}
	owner, found, err := s.Orders.Owner(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if found && !caller.MayReadOrder(owner) {
		return fmt.Errorf("%w: %s", errOrderNotFound, id)
	}
	return nil
}

func orNone(rs access.Roles) string {
	if rs == 0 {
		return "none"
	}
	return rs.String()
}

// notYours is the error of command c on an order that is not the caller's: exactly the one of
// the same command on an order that does not exist, so that the answer does not tell them
// apart. (With If-Match, command.Handler answers a missing order with a failed precondition.)
func notYours(id string, c order.Command, ifMatch precondition) error {
	if ifMatch.tags {
		return fmt.Errorf("%s on order %s: %w: want one of %v", c.CommandName(), id, command.ErrPreconditionFailed, ifMatch.revisions)
	}
	if _, err := order.Decide(order.State{}, order.InCurrency(c, ""), time.Now()); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", errOrderNotFound, id)
}
