// Package metered measures an event store for Prometheus: the latency of its appends, and what
// the embedded and PostgreSQL stores report of their writer (the size of a group commit, the
// frames of the write-ahead log). It sits beside the store so that what it runs on each append
// is the store's own concern, not code of the API that serves the metrics.
package metered

import (
	"context"
	"errors"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are an event store's metrics. Make them with New.
type Metrics struct {
	appends *prometheus.HistogramVec
	batches prometheus.Histogram
	wal     *prometheus.GaugeVec
}

// New makes the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		appends: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orders_eventstore_append_seconds",
			Help:    "Latency of event store appends (durable on return), by result: ok, wrong-expected-revision or error.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 0.1 ms to 3.3 s
		}, []string{"result"}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orders_eventstore_batch_size",
			Help:    "Appends and deletes committed together by one group commit of the embedded store (one disk sync), or by one transaction of this node's PostgreSQL writer.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 to 512
		}),
		wal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orders_eventstore_wal_frames",
			Help: "Frames (pages) in the embedded store's write-ahead log: all of them, and those not yet copied into the database file (not_copied). Both fall when the log starts over.",
		}, []string{"frames"}),
	}
	reg.MustRegister(m.appends, m.batches, m.wal)
	return m
}

// ObserveBatch records the size of a group commit: give it to sqlite.Config.OnBatch (or
// postgres.Config.OnBatch).
func (m *Metrics) ObserveBatch(size int) { m.batches.Observe(float64(size)) }

// ObserveWAL records the size of the embedded store's write-ahead log: give it to
// sqlite.Config.OnWAL.
func (m *Metrics) ObserveWAL(frames, notCopied int) {
	m.wal.WithLabelValues("all").Set(float64(frames))
	m.wal.WithLabelValues("not_copied").Set(float64(notCopied))
}

// TimeAppends returns s with the latency of its appends recorded. A store that appends to
// several streams at once stays one, since the key pipeline appends with a key's claim in one
// step only where the store can.
func (m *Metrics) TimeAppends(s eventstore.Store) eventstore.Store {
	t := timedStore{s, m}
	if ms, ok := s.(eventstore.MultiStreamAppender); ok {
		return timedMultiStore{t, ms}
	}
	if a, ok := s.(eventstore.MaxAgeSetter); ok {
		return timedAgingStore{t, a} // eventstore.Write sets a key stream's age through it
	}
	return t
}

// timedAgingStore is a timed store that sets streams' maximum ages apart from appends.
type timedAgingStore struct {
	timedStore
	eventstore.MaxAgeSetter
}

type timedStore struct {
	eventstore.Store
	m *Metrics
}

func (s timedStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, stream, expected, events...)
	s.m.observeAppend(start, err)
	return res, err
}

type timedMultiStore struct {
	timedStore
	multi eventstore.MultiStreamAppender
}

func (s timedMultiStore) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	start := time.Now()
	res, err := s.multi.MultiStreamAppend(ctx, appends...)
	s.m.observeAppend(start, err)
	return res, err
}

func (m *Metrics) observeAppend(start time.Time, err error) {
	result := "ok"
	switch {
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		result = "wrong-expected-revision"
	case err != nil:
		result = "error"
	}
	m.appends.WithLabelValues(result).Observe(time.Since(start).Seconds())
}
