package kurrent_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/google/uuid"
)

// The benchmarks run the backend through the client against the test server (gRPC on loopback,
// the embedded store behind it), or against KURRENTDB_URL when set. Test-server figures measure
// the client and the translation, not KurrentDB.

// benchEvent is a small event shaped like an order event with metadata.
func benchEvent() eventstore.EventData {
	return eventstore.EventData{
		ID:       uuid.New(),
		Type:     "order.line-added.v1",
		Data:     []byte(`{"sku":"SKU-123","quantity":2,"unitPrice":1999}`),
		Metadata: []byte(`{"principal":"shop-1","command":"add-line","correlationId":"01J9Z0"}`),
	}
}

func openBench(b *testing.B) (*kurrent.Store, string) {
	b.Helper()
	url := benchURL(b)
	s := MustOpen(b, url)
	b.Cleanup(func() { s.Close() })
	return s, uuid.NewString()[:8] // a prefix of the run's own, for a shared server
}

func benchURL(b *testing.B) string {
	if url := kurrentdbURL(); url != "" {
		return url
	}
	return StartServer(b).URL()
}

func reportRate(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendSequential: one goroutine, one event per append, each acknowledged before the
// next.
func BenchmarkAppendSequential(b *testing.B) {
	s, run := openBench(b)
	ctx := context.Background()
	stream := "order-seq-" + run
	expected := eventstore.NoStream
	for b.Loop() {
		res, err := s.Append(ctx, stream, expected, benchEvent())
		if err != nil {
			b.Fatal(err)
		}
		expected = eventstore.Exact(res.Revision)
	}
	reportRate(b, b.N)
}

// BenchmarkAppendConcurrent: 64 goroutines, one event per append, each on its own stream with
// an exact expected revision.
func BenchmarkAppendConcurrent(b *testing.B) {
	s, run := openBench(b)
	ctx := context.Background()
	var streams atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		stream := fmt.Sprintf("order-%s-%d", run, streams.Add(1))
		expected := eventstore.NoStream
		for pb.Next() {
			res, err := s.Append(ctx, stream, expected, benchEvent())
			if err != nil {
				b.Error(err)
				return
			}
			expected = eventstore.Exact(res.Revision)
		}
	})
	reportRate(b, b.N)
}

// BenchmarkReadStream1000 reads a 1,000-event stream from start to end.
func BenchmarkReadStream1000(b *testing.B) {
	s, run := openBench(b)
	ctx := context.Background()
	stream := "order-1000-" + run
	for i := 0; i < 1000; i += 100 {
		events := make([]eventstore.EventData, 100)
		for j := range events {
			events[j] = benchEvent()
		}
		if _, err := s.Append(ctx, stream, eventstore.Any, events...); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		n := 0
		for _, err := range s.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("read %d events, want 1000", n)
		}
	}
	reportRate(b, b.N*1000)
}
