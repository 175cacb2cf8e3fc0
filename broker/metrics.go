package broker

import "github.com/prometheus/client_golang/prometheus"

// The outcomes of a command message, as the metrics name them.
const (
	outcomeApplied  = "applied"       // acked with a 2xx answered now
	outcomeReplayed = "replayed"      // acked with its key's first 2xx, replayed
	outcomeRetried  = "retried"       // redelivered later: a 5xx, 429 or an answer with Retry-After
	outcomeDead     = "dead-lettered" // terminated with its problem published as a dead letter
)

// Metrics are the broker's Prometheus metrics. Consumer labels are the intake file's consumers,
// at most MaxEntries.
type Metrics struct {
	messages      *prometheus.CounterVec
	redeliveries  *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec
	published     prometheus.Counter
	lagSeconds    prometheus.Histogram
	lagEvents     prometheus.Gauge
	publishErrors prometheus.Counter
}

// NewMetrics registers the broker's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orders_nats_messages_total",
			Help: "Command messages settled, by consumer and outcome: applied, replayed, retried, dead-lettered."}, []string{"consumer", "outcome"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orders_nats_redeliveries_total",
			Help: "Command messages received that JetStream had delivered before, by consumer."}, []string{"consumer"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orders_nats_dead_letters_total",
			Help: "Command messages published to the dead-letter subject, by consumer."}, []string{"consumer"}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "orders_nats_published_events_total",
			Help: "Order events published to the events stream and acknowledged by JetStream, by this node."}),
		lagSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "orders_nats_publish_lag_seconds",
			Help:    "From an event's commit to JetStream's acknowledgement of its publication.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		lagEvents: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orders_nats_publish_lag_events",
			Help: "Log positions between the publisher's checkpoint and the log's head, on the node that publishes."}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "orders_nats_publish_errors_total",
			Help: "Batches of events whose publication failed and is tried again."}),
	}
	reg.MustRegister(m.messages, m.redeliveries, m.deadLetters, m.published, m.lagSeconds, m.lagEvents, m.publishErrors)
	return m
}
