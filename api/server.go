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

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

var (
	errMalformed     = errors.New("malformed request")
	errOrderNotFound = errors.New("order not found")
	errNotFound      = errors.New("not found")
	errUnauthorized  = errors.New("missing or unknown API key")
)

// Server serves the API. Construct it with its fields set, then call Handler.
type Server struct {
	Store       eventstore.Store
	Feed        eventstore.Feed
	Orders      *command.Handler
	Projections *projections.Runner
	Reads       projections.Queries
	Keys        *idempotency.Keys
	// Fingerprints fingerprints keyed requests; nil remembers none.
	Fingerprints *idempotency.Fingerprints
	IDs          *command.OrderIDs
	Log          *slog.Logger
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
	// RequestTimeout bounds each request's work; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Hooks are for tests that crash the process at a precise point; nil in production.
	Hooks Hooks

	completing sync.WaitGroup // outcomes recorded after their answers (see command and Drain)

	// BodyMemory bounds the bytes of command bodies being read and checked at once, past the
	// first 16 KiB of each (see readBody); 0 means DefaultBodyMemory.
	BodyMemory int64
	bodies     bodyBudget
}

// Hooks run at the points of a keyed command where a crash matters most.
type Hooks struct {
	AfterClaim  func(key string) // the key is claimed (maybe in this process only: Request.Defer), the command has not run
	AfterAppend func(key string) // the order events are appended, the outcome is not recorded
	AfterAnswer func(key string) // the answer is given (or on its way), the outcome is not recorded
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestID())
	e.Use(s.logRequests)
	e.Use(s.observeRequests)
	e.Use(s.limitTime)
	e.Use(middleware.BodyLimit("1M"))

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", OpenAPI) })
	e.GET("/problems/:code", problemPage)

	// Authentication is added per route, not to a group: a group with middleware answers
	// every unknown method under it with 404 instead of 405.
	auth := s.authenticate
	e.POST("/v1/orders", s.command(createOrder), auth)
	e.GET("/v1/orders", s.listOrders, auth)
	e.GET("/v1/orders/:id", s.getOrder, auth)
	e.GET("/v1/idempotency-keys/:key", s.getKey, auth)
	e.POST("/v1/payments/:paymentId/confirm", s.command(confirmPaymentByID), auth)
	e.GET("/admin/projections", s.projectionStatus, auth)
	e.POST("/admin/projections/:name/rebuild", s.rebuildProjection, auth)
	if s.Metrics != nil {
		e.GET("/metrics", s.serveMetrics, auth)
	}
	e.GET("/v1/orders/:id/events", s.getEvents, auth)
	e.GET("/v1/orders/:id/state", s.getState, auth)
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
	return e
}

// handleError answers every error with its problem; internal errors are logged, not shown.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemOf(err)
	if p.Status >= 500 {
		s.Log.Error("request failed", "request_id", requestID(c), "error", err)
	}
	if p.Status == http.StatusServiceUnavailable && c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", "1") // the problem's text promises one
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

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		// Attributes typed, not boxed in interfaces: a line per request.
		s.Log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
			slog.String("request_id", requestID(c)),
			slog.String("principal", principal(c)),
			slog.String("method", c.Request().Method),
			slog.String("route", c.Path()),
			slog.Int("status", c.Response().Status),
			slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000))
		return nil
	}
}

func (s *Server) readyz(c echo.Context) error {
	if s.Ready != nil {
		if err := s.Ready(c.Request().Context()); err != nil {
			writeProblem(c, problem("unavailable", err.Error()), nil)
			return nil
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func problemPage(c echo.Context) error {
	for _, p := range problemTypes {
		if p.code == c.Param("code") {
			return c.String(http.StatusOK, p.title+"\n\n"+p.about+"\n")
		}
	}
	return echo.ErrNotFound
}
