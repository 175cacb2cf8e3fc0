package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/eventstore/metered"
	"github.com/acme/orders/projections"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the service's Prometheus metrics, on a registry of their own, served at
// /metrics. Make them with NewMetrics; a Server without them serves no /metrics.
type Metrics struct {
	Registry *prometheus.Registry
	// Store are the event store's metrics, on Registry, for main to hand to the store: their
	// code is below the pipeline, so that no append runs code of the API.
	Store   *metered.Metrics
	handler http.Handler

	commands       *prometheus.CounterVec
	providerEvents *prometheus.CounterVec
	requests       *prometheus.HistogramVec

	connsOpen    prometheus.Gauge
	connsMax     prometheus.Gauge
	connsRefused prometheus.Counter
}

// NewMetrics makes the metrics, with the Go runtime's and the process's.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orders_commands_total",
			Help: "Commands by type and outcome: ok, replayed, or the problem code of the answer (invalid-transition, unauthorized, ...).",
		}, []string{"command", "outcome"}),
		providerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orders_provider_events_total",
			Help: "Payment providers' deliveries by provider (its name in the providers file; \"\" for a name it does not hold) and outcome: applied, unapplied (recorded, not applied), replayed (a redelivery), retry (409: in flight, or too early), refused (another 4xx), unverified (401), malformed (400), failed (5xx).",
		}, []string{"provider", "outcome"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orders_http_request_duration_seconds",
			Help:    "Latency of HTTP requests by method (other for any but GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS), route (its pattern, never its values; unmatched for any other path) and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms to 4 s
		}, []string{"method", "route", "status"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orders_http_connections_open",
			Help: "HTTP connections open now, idle ones included.",
		}),
		connsMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orders_http_connections_max",
			Help: "Most HTTP connections open at once (--max-connections); one more is refused.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orders_http_connections_refused_total",
			Help: "HTTP connections refused because --max-connections were open: answered 503 and closed.",
		}),
	}
	m.Store = metered.New(m.Registry)
	m.Registry.MustRegister(m.commands, m.providerEvents, m.requests,
		m.connsOpen, m.connsMax, m.connsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return m
}

// connOpened, connClosed and connRefused count the connections of a Listener; m may be nil.
func (m *Metrics) connOpened() {
	if m != nil {
		m.connsOpen.Inc()
	}
}

func (m *Metrics) connClosed() {
	if m != nil {
		m.connsOpen.Dec()
	}
}

func (m *Metrics) connRefused() {
	if m != nil {
		m.connsRefused.Inc()
	}
}

// WatchProjections exports the checkpoint, the head and the lag of r's projections, read from
// r.Status at each scrape.
func (m *Metrics) WatchProjections(r *projections.Runner) {
	m.Registry.MustRegister(projectionCollector{r})
}

var (
	projectionCheckpoint = prometheus.NewDesc("orders_projection_checkpoint_position",
		"Global log position up to which the projection has applied every event.", []string{"projection"}, nil)
	projectionHead = prometheus.NewDesc("orders_projection_head_position",
		"Global log position of the last event of the log, as the projection's status saw it.", []string{"projection"}, nil)
	projectionLagEvents = prometheus.NewDesc("orders_projection_lag_events",
		"Events (by position) between the projection's checkpoint and the head of the log.", []string{"projection"}, nil)
	projectionLagSeconds = prometheus.NewDesc("orders_projection_lag_seconds",
		"How long the projection has been behind the head of the log; 0 when caught up.", []string{"projection"}, nil)
	projectionUp = prometheus.NewDesc("orders_projection_up",
		"1 unless the projection has failed or stopped.", []string{"projection", "state"}, nil)
)

// projectionStatusTimeout bounds the status read of a scrape.
const projectionStatusTimeout = 2 * time.Second

type projectionCollector struct{ r *projections.Runner }

func (projectionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{projectionCheckpoint, projectionHead, projectionLagEvents, projectionLagSeconds, projectionUp} {
		ch <- d
	}
}

func (c projectionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), projectionStatusTimeout)
	defer cancel()
	st, err := c.r.Status(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(projectionHead, err)
		return
	}
	for _, p := range st {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{p.Name}, labels...)...)
		}
		gauge(projectionCheckpoint, float64(p.Checkpoint.Commit))
		gauge(projectionHead, float64(p.Head.Commit))
		gauge(projectionLagEvents, float64(p.LagEvents))
		gauge(projectionLagSeconds, p.LagSeconds)
		up := 1.0
		if p.State == projections.StateFailed || p.State == projections.StateStopped {
			up = 0
		}
		gauge(projectionUp, up, string(p.State))
	}
}

// observeRequests records every request's latency by route and, for commands, its outcome.
// It answers the handler's error itself, so that the status is known. routes are the route
// patterns of the API. With no Metrics it does nothing.
func (s *Server) observeRequests(routes map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if s.Metrics == nil {
			return next
		}
		return func(c echo.Context) error {
			err := next(c)
			code := ""
			if err != nil {
				code = problemOf(err).Code()
				c.Error(err)
			}
			r := stateOf(c)
			status := c.Response().Status
			route := c.Path()
			if !routes[route] {
				route = "unmatched" // never the raw path: it would make a series per URL
			}
			s.Metrics.requestSeries(methodLabel(c.Request().Method), route, status).Observe(time.Since(r.start).Seconds())
			if r.command != "" {
				s.Metrics.commandSeries(r.command, commandOutcome(c, r.outcome, status, code)).Inc()
			}
			return nil
		}
	}
}

// commandOutcome is the outcome label of a command answered status: replayed, ok, or the
// problem code of its answer (code, or left, the one a command handler left).
func commandOutcome(c echo.Context, left string, status int, code string) string {
	if left != "" {
		code = left
	}
	switch {
	case c.Response().Header().Get("Idempotent-Replayed") == "true":
		return "replayed"
	case status < 400:
		return "ok"
	case code == "":
		return statusLabel(status)
	}
	return code
}

// methodLabel is the label of a request's method: the standard methods the API or its router
// answers, and "other" for any other, so that a client cannot add a series per method it
// makes up.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions:
		return method
	}
	return "other"
}

// statusLabel is the label of a status. The API writes statuses of a closed set; anything
// outside the range of HTTP statuses is "other" all the same.
func statusLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

// serveMetrics answers /metrics.
func (s *Server) serveMetrics(c echo.Context) error {
	s.Metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// requestSeries is the latency histogram of requests of method (methodLabel) on route (a
// pattern or "unmatched") answered status.
func (m *Metrics) requestSeries(method, route string, status int) prometheus.Observer {
	return m.requests.WithLabelValues(method, route, statusLabel(status))
}

// commandSeries is the counter of commands named command with outcome (commandOutcome).
func (m *Metrics) commandSeries(command, outcome string) prometheus.Counter {
	return m.commands.WithLabelValues(command, outcome)
}
