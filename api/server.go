package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/orders/fault"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/internal/requestlog"
	"github.com/acme/orders/keyed"
	"github.com/acme/orders/projections"
	"github.com/acme/orders/providers"
	"github.com/acme/orders/webhooks"
	"github.com/labstack/echo/v4"
)

// MaxHeaderBytes bounds a request's headers (http.Server.MaxHeaderBytes); net/http refuses
// more with 431 before any handler runs (see Listener for how that answer is made a problem).
const MaxHeaderBytes = 64 << 10

var (
	errMalformed     = fault.New(fault.Invalid, "", "malformed request")
	errOrderNotFound = fault.New(fault.NotFound, "", "order not found")
	errNotFound      = fault.New(fault.NotFound, "", "not found")
	errUnauthorized  = fault.New(fault.Unauthorized, "", "missing or unknown API key")
)

// Server serves the API. Construct it with its fields set, then call Handler.
type Server struct {
	Store       eventstore.Store
	Feed        eventstore.Feed
	Orders      *command.Handler
	Projections *projections.Runner
	Reads       projections.Queries
	Keys        *idempotency.Keys
	IDs         *command.OrderIDs
	Log         *slog.Logger
	// APIKeys are the keys accepted, with their principals and roles. Empty means development
	// mode: every request is the principal "local" with every role. ReplaceAPIKeys rotates
	// them while the server runs.
	APIKeys  APIKeys
	replaced atomic.Pointer[APIKeys] // see ReplaceAPIKeys
	// Node names this process in key claims.
	Node string
	// Ready reports whether the service can take commands, for /readyz; nil means always.
	Ready func(context.Context) error
	// Metrics, if set, are recorded and served at /metrics.
	Metrics *Metrics
	// RequestTimeout bounds each request's work; 0 means 30 s.
	RequestTimeout time.Duration
	// Hooks are for tests that crash the process at a precise point; nil in production.
	Hooks Hooks
	// LoopbackHosts has development mode (no keys) answer only requests whose Host names the
	// loopback (localhost, 127.0.0.0/8, ::1): 403 for others, which a DNS-rebinding page sends.
	LoopbackHosts bool
	// Console, if set, serves /console/ and everything under it (package console).
	Console http.Handler
	// Webhooks are the webhook endpoints and their deliveries; nil answers their routes 503.
	Webhooks *webhooks.Service
	// Broker, if set, tells the state of the message broker's connection for /readyz. It never
	// makes the service unready: HTTP commands go on without the broker.
	Broker func() string

	dispatcher atomic.Pointer[echo.Echo] // the handlers Dispatch runs, made by Handler

	providerSet atomic.Pointer[providers.Set] // see SetProviders

	pipelineOnce  sync.Once
	keyedPipeline *keyed.Pipeline // see pipeline
	failures      *logLimiter     // the log lines of 5xx answers (see answerFailures)

	// BodyMemory bounds the bytes of command bodies being read and checked at once, past the
	// first 16 KiB of each (see readBody); 0 means 16 MiB.
	BodyMemory int64
	bodies     bodyBudget
	// ProviderBodyMemory bounds, the same way, the bytes of payment providers' deliveries,
	// which are read before they are verified (see providerBodyBudget); 0 means 4 MiB.
	ProviderBodyMemory int64
	providerBodies     bodyBudget
}

// Hooks run at the points of a keyed command where a crash matters most.
type Hooks = keyed.Hooks

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	s.failures = newLogLimiter(time.Second)
	if s.Log != nil {
		s.Log = requestlog.Logger(s.Log)
	}
	routes := map[string]bool{} // the route patterns, filled below once every route is added
	e.Use(s.startRequests)
	e.Use(s.answerFailures)
	e.Use(s.logRequests)
	e.Use(s.observeRequests(routes))
	e.Use(limitBody)
	s.addRoutes(e)
	for _, r := range e.Routes() {
		routes[r.Path] = true
	}
	s.dispatcher.Store(e)
	return e
}

func (s *Server) addRoutes(e *echo.Echo) {
	// HEAD is answered wherever GET is, by the same handler: net/http sends its status and
	// headers and leaves out the body.
	get := func(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
		e.GET(path, h, m...)
		e.HEAD(path, h, m...)
	}
	get("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	get("/readyz", s.readyz)
	get("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", OpenAPI) })
	get("/problems/:code", problemPage)

	// Authentication is added per route, not to a group: a group with middleware answers
	// every unknown method under it with 404 instead of 405.
	auth := s.authenticate
	e.POST("/v1/orders", s.command(createOrder), auth)
	get("/v1/orders", s.listOrders, auth)
	get("/v1/orders/:id", s.getOrder, auth)
	get("/v1/idempotency-keys/:key", s.getKey, auth)
	e.POST("/v1/payments/:paymentId/confirm", s.command(confirmPaymentByID), auth)
	e.POST("/v1/provider-events/:provider", s.providerEvent) // signed by the provider: no API key
	get("/v1/provider-events", s.listUnapplied, auth)
	get("/v1/reports/sales", s.salesReport, auth)
	get("/admin/projections", s.projectionStatus, auth)
	e.POST("/admin/projections/:name/rebuild", s.rebuildProjection, auth)
	if s.Metrics != nil {
		get("/metrics", s.serveMetrics, auth)
	}
	get("/v1/orders/:id/events", s.getEvents, auth)
	get("/v1/orders/:id/state", s.getState, auth)
	e.POST("/v1/orders/:id/lines", s.command(addLine), auth)
	e.PUT("/v1/orders/:id/lines/:sku", s.command(changeLine), auth)
	e.DELETE("/v1/orders/:id/lines/:sku", s.command(removeLine), auth)
	e.POST("/v1/orders/:id/payments", s.command(startPayment), auth)
	e.POST("/v1/orders/:id/payments/:paymentId/confirm", s.command(confirmPayment), auth)
	e.POST("/v1/orders/:id/payments/:paymentId/fail", s.command(failPayment), auth)
	e.POST("/v1/orders/:id/cancel", s.command(cancelOrder), auth)
	e.POST("/v1/orders/:id/shipments", s.command(ship), auth)
	e.POST("/v1/orders/:id/refunds", s.command(requestRefund), auth)
	e.POST("/v1/orders/:id/refunds/:refundId/complete", s.command(completeRefund), auth)
	if s.Console != nil {
		// The console authenticates by its own session cookie, through Authenticate.
		e.Any("/console", echo.WrapHandler(s.Console))
		e.Any("/console/*", echo.WrapHandler(s.Console))
	}
	s.addWebhookRoutes(e, get)
}

// handleError answers every error with its problem. The cause of a 5xx is logged by
// answerFailures, not shown.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemOf(err)
	if p.Status >= 500 {
		noteCause(c.Request().Context(), err)
	}
	switch {
	case p.Status == http.StatusUnauthorized:
		// RFC 6750 §3: the scheme that would have been accepted.
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="orders"`)
	case errors.Is(err, fault.InFlight):
		c.Response().Header().Set("Retry-After", "1") // the key's holder is still running
	}
	writeProblem(c, p, nil)
}

func writeProblem(c echo.Context, p Problem, header http.Header) {
	body, _ := json.Marshal(p)
	for k, v := range header {
		c.Response().Header()[k] = v
	}
	c.Blob(p.Status, "application/problem+json", append(body, '\n'))
}

// requestID is the request's X-Request-Id (see startRequests).
func requestID(c echo.Context) string { return stateOf(c).ID }

// maxRequestID is the longest X-Request-Id taken from a client.
const maxRequestID = 128

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		r := stateOf(c)
		// Attributes typed, not boxed in interfaces: a line per request.
		s.Log.LogAttrs(r, slog.LevelInfo, "request",
			slog.String("method", methodLabel(c.Request().Method)),
			slog.String("route", c.Path()),
			slog.Int("status", c.Response().Status),
			slog.Float64("latency_ms", float64(time.Since(r.start).Microseconds())/1000))
		return nil
	}
}

func (s *Server) readyz(c echo.Context) error {
	if s.Ready != nil {
		if err := s.Ready(c.Request().Context()); err != nil {
			noteCause(c.Request().Context(), err)
			writeProblem(c, problem("unavailable", err.Error()), nil)
			return nil
		}
	}
	ready := map[string]string{"status": "ready"}
	if s.Broker != nil {
		ready["nats"] = s.Broker()
	}
	return c.JSON(http.StatusOK, ready)
}

func problemPage(c echo.Context) error {
	for _, p := range problemTypes {
		if p.code == c.Param("code") {
			return c.String(http.StatusOK, p.title+"\n\n"+p.about+"\n")
		}
	}
	return echo.ErrNotFound
}
