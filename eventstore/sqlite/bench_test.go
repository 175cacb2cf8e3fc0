package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// benchEvent is a small event shaped like an order event with metadata.
func benchEvent() eventstore.EventData {
	return eventstore.EventData{
		ID:       uuid.New(),
		Type:     "order.line-added.v1",
		Data:     []byte(`{"sku":"SKU-123","quantity":2,"unitPrice":1999}`),
		Metadata: []byte(`{"principal":"shop-1","command":"add-line","correlationId":"01J9Z0"}`),
	}
}

func openBench(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.TempDir(), sqlite.Config{OnBatch: func(n int) {
		batches.Add(1)
		batched.Add(int64(n))
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// batches and batched count group commits and the appends they held.
var batches, batched atomic.Int64

// reportBatches reports how many appends shared a commit, on average, since the last call.
func reportBatches(b *testing.B) {
	if n := batches.Swap(0); n > 0 {
		b.ReportMetric(float64(batched.Swap(0))/float64(n), "appends/batch")
	}
}

func reportRate(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendSequential: one goroutine, one event per append, each synced before the next.
func BenchmarkAppendSequential(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	reportBatches(b)
	expected := eventstore.NoStream
	for b.Loop() {
		res, err := s.Append(ctx, "order-seq", expected, benchEvent())
		if err != nil {
			b.Fatal(err)
		}
		expected = eventstore.Exact(res.Revision)
	}
	reportRate(b, b.N)
	reportBatches(b)
}

// BenchmarkAppendConcurrent: 64 goroutines, one event per append, each on its own stream with
// an exact expected revision. Group commit lets them share syncs.
func BenchmarkAppendConcurrent(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	reportBatches(b) // forget earlier benchmarks' batches
	var streams atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		stream := fmt.Sprintf("order-%d", streams.Add(1))
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
	reportBatches(b)
}

// BenchmarkReadStream1000 reads a 1,000-event stream from start to end.
func BenchmarkReadStream1000(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	fill(b, s, "order-1000", 1000, 100)
	for b.Loop() {
		n := 0
		for _, err := range s.ReadStream(ctx, "order-1000", eventstore.ReadStreamOptions{}) {
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

// BenchmarkReadStream10 reads a 10-event stream, the size of most orders: the cost of a read
// beyond its rows.
func BenchmarkReadStream10(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	fill(b, s, "order-10", 10, 10)
	for b.Loop() {
		n := 0
		for _, err := range s.ReadStream(ctx, "order-10", eventstore.ReadStreamOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10 {
			b.Fatalf("read %d events, want 10", n)
		}
	}
	reportRate(b, b.N*10)
}

// BenchmarkReadAll reads a 100,000-event log from the start.
func BenchmarkReadAll(b *testing.B) {
	const total = 100_000
	s := openBench(b)
	ctx := context.Background()
	for i := range 100 {
		fill(b, s, fmt.Sprintf("order-%d", i), total/100, 100)
	}
	for b.Loop() {
		n := 0
		for _, err := range s.ReadAll(ctx, eventstore.ReadAllOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != total {
			b.Fatalf("read %d events, want %d", n, total)
		}
	}
	reportRate(b, b.N*total)
}

// fill appends n events to stream in appends of per events.
func fill(tb testing.TB, s *sqlite.Store, stream string, n, per int) {
	tb.Helper()
	for i := 0; i < n; i += per {
		events := make([]eventstore.EventData, min(per, n-i))
		for j := range events {
			events[j] = benchEvent()
		}
		if _, err := s.Append(context.Background(), stream, eventstore.Any, events...); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkAppendNewStreams: 64 goroutines, each append creating a stream of one event under a
// scattered name, as key claims do, with random (v4) or time-ordered (v7) event ids: the index
// of event ids takes a v7 id at its end, a v4 id at a random page.
func BenchmarkAppendNewStreams(b *testing.B) {
	for _, c := range []struct {
		name string
		id   func() uuid.UUID
	}{
		{"v4", uuid.New},
		{"v7", func() uuid.UUID { return uuid.Must(uuid.NewV7()) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			var streams atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e := benchEvent()
					e.ID = c.id()
					stream := fmt.Sprintf("key-%016x", uint64(streams.Add(1))*0x9E3779B97F4A7C15)
					if _, err := s.Append(ctx, stream, eventstore.NoStream, e); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRate(b, b.N)
		})
	}
}

// BenchmarkAppendContended: 8 goroutines append to one stream with the exact revision they
// last read, and read the stream's last revision again when the append is refused, as
// command handlers on several nodes do with one busy order. It reports successful appends and
// refused ones per second; compare successes/s with BenchmarkAppendSequential.
func BenchmarkAppendContended(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	const stream = "order-contended"
	if _, err := s.Append(ctx, stream, eventstore.NoStream, benchEvent()); err != nil {
		b.Fatal(err)
	}
	var successes, conflicts atomic.Int64
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rev, err := lastRevision(ctx, s, stream)
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			res, err := s.Append(ctx, stream, eventstore.Exact(rev), benchEvent())
			switch {
			case err == nil:
				successes.Add(1)
				rev = res.Revision
			case errors.Is(err, eventstore.ErrWrongExpectedRevision):
				conflicts.Add(1)
				if rev, err = lastRevision(ctx, s, stream); err != nil {
					b.Error(err)
					return
				}
			default:
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(successes.Load())/b.Elapsed().Seconds(), "successes/s")
	b.ReportMetric(float64(conflicts.Load())/b.Elapsed().Seconds(), "conflicts/s")
	reportBatches(b)
}

// lastRevision reads the revision of the stream's last event.
func lastRevision(ctx context.Context, s *sqlite.Store, stream string) (uint64, error) {
	var rev uint64
	for e, err := range s.ReadStream(ctx, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}) {
		if err != nil {
			return 0, err
		}
		rev = e.Revision
	}
	return rev, nil
}

// BenchmarkCreate: 64 goroutines, each iteration shaped like an order's create: one
// MultiStreamAppend of three new streams under scattered names (the idempotency key's claim and
// the client reference's with one event each, the order's with two), then one Append of one
// event to the key's stream at its exact revision, as the recorded outcome.
func BenchmarkCreate(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	reportBatches(b)
	var creates atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := uint64(creates.Add(1)) * 0x9E3779B97F4A7C15
			key := fmt.Sprintf("key-%016x", n)
			res, err := s.MultiStreamAppend(ctx,
				eventstore.StreamAppend{Stream: key, Expected: eventstore.NoStream, Events: []eventstore.EventData{benchEvent()}},
				eventstore.StreamAppend{Stream: fmt.Sprintf("ref-%016x", n), Expected: eventstore.NoStream, Events: []eventstore.EventData{benchEvent()}},
				eventstore.StreamAppend{Stream: fmt.Sprintf("order-%016x", n), Expected: eventstore.NoStream, Events: []eventstore.EventData{benchEvent(), benchEvent()}},
			)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := s.Append(ctx, key, eventstore.Exact(res[0].Revision), benchEvent()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, 5*b.N)
	reportBatches(b)
}
