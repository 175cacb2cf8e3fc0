package metered_test

import (
	"context"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/metered"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Every append is timed under its result, whether made alone or with others in one step, and
// a store that appends to several streams at once stays one; the writer's reports are kept.
func TestAppendsAreTimedByResult(t *testing.T) {
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reg := prometheus.NewRegistry()
	m := metered.New(reg)
	timed := m.TimeAppends(s)
	multi, ok := timed.(eventstore.MultiStreamAppender)
	if !ok {
		t.Fatal("the timed embedded store appends to no several streams at once")
	}
	ctx := context.Background()
	event := func() eventstore.EventData {
		return eventstore.EventData{ID: uuid.New(), Type: "t.v1", Data: []byte("{}")}
	}
	if _, err := timed.Append(ctx, "a", eventstore.NoStream, event()); err != nil {
		t.Fatal(err)
	}
	if _, err := timed.Append(ctx, "a", eventstore.NoStream, event()); err == nil {
		t.Fatal("a second append to a stream that exists, expecting none, succeeded")
	}
	if _, err := multi.MultiStreamAppend(ctx, eventstore.StreamAppend{Stream: "b", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}},
		eventstore.StreamAppend{Stream: "c", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}}); err != nil {
		t.Fatal(err)
	}
	m.ObserveBatch(3)
	m.ObserveWAL(10, 4)

	got := gathered(t, reg)
	want := map[string]float64{
		`orders_eventstore_append_seconds{result="ok"}`:                      2,
		`orders_eventstore_append_seconds{result="wrong-expected-revision"}`: 1,
		`orders_eventstore_batch_size`:                                       1,
		`orders_eventstore_wal_frames{frames="all"}`:                         10,
		`orders_eventstore_wal_frames{frames="not_copied"}`:                  4,
	}
	for series, v := range want {
		if got[series] != v {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], v, got)
		}
	}
}

// gathered is every series of reg by name and labels: a histogram's count, a gauge's value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			name := f.GetName()
			for _, l := range s.GetLabel() {
				name += "{" + l.GetName() + `="` + l.GetValue() + `"}`
			}
			if h := s.GetHistogram(); h != nil {
				out[name] = float64(h.GetSampleCount())
			} else {
				out[name] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}
