package webhooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count deliveries. Their labels are closed sets: no endpoint id, order id or URL.
type Metrics struct {
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	lag      prometheus.Histogram
	dead     prometheus.Counter
	dropped  prometheus.Counter
	disabled prometheus.Counter
}

// NewMetrics makes the metrics of s and registers them with reg.
func NewMetrics(reg prometheus.Registerer, s *Service) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orders_webhooks_attempts_total",
			Help: "Delivery attempts by outcome: ok (a 2xx), status (another answer), timeout, refused (a refused address), error.",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orders_webhooks_attempt_seconds",
			Help:    "Latency of delivery attempts, until the answer's headers (or the failure).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms to 16 s
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orders_webhooks_lag_seconds",
			Help:    "From an event's commit to its successful delivery.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20), // 1 ms to 9 min
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orders_webhooks_dead_letters_total",
			Help: "Deliveries dead-lettered after their last attempt (or a 410 Gone).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orders_webhooks_dead_letters_dropped_total",
			Help: "Dead letters dropped, the oldest first, when an endpoint's dead-letter stream outgrew --webhooks-dead-letters.",
		}),
		disabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orders_webhooks_endpoints_disabled_total",
			Help: "Endpoints disabled for failing longer than --webhooks-disable-after.",
		}),
	}
	endpoints := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orders_webhooks_endpoints_disabled",
		Help: "Endpoints disabled now (by an operator, a client, or for failing).",
	}, func() float64 {
		n := 0
		for _, ep := range s.Endpoints.List("", true) {
			if ep.Status == StatusDisabled {
				n++
			}
		}
		return float64(n)
	})
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orders_webhooks_pending",
		Help: "Deliveries waiting, in flight or waiting for a retry, on this node.",
	}, func() float64 { return float64(s.PendingTotal()) })
	reg.MustRegister(m.attempts, m.latency, m.lag, m.dead, m.dropped, m.disabled, endpoints, pending)
	reg.MustRegister(tailMetrics(s)...)
	return m
}

func (s *Service) observeAttempt(a Attempt, recorded time.Time) {
	if s.Metrics == nil {
		return
	}
	o := outcome(a)
	s.Metrics.attempts.WithLabelValues(o).Inc()
	s.Metrics.latency.Observe(a.LatencyMS / 1000)
	if o == "ok" && !recorded.IsZero() {
		s.Metrics.lag.Observe(s.now().Sub(recorded).Seconds())
	}
}

func (s *Service) deadInc() {
	if s.Metrics != nil {
		s.Metrics.dead.Inc()
	}
}

func (s *Service) droppedAdd(n int) {
	if s.Metrics != nil {
		s.Metrics.dropped.Add(float64(n))
	}
}

func (s *Service) disabledInc() {
	if s.Metrics != nil {
		s.Metrics.disabled.Inc()
	}
}
