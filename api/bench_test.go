package api

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"golang.org/x/sync/errgroup"
)

// BenchmarkReplay serves a retry of a completed command: the cheapest keyed request, and the
// one whose cost the load harness's replay phase measures against its baseline. The server
// logs as in production (newServer).
func BenchmarkReplay(b *testing.B) {
	srv, _ := newServer(b, nil)
	h := srv.Handler()
	create := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders",
			strings.NewReader(`{"customerId":"c-1","currency":"EUR","lines":[{"sku":"a","quantity":2,"unitPrice":250}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-create")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if r := create(); r.Code != http.StatusCreated {
		b.Fatalf("create: %d %s", r.Code, r.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := create(); r.Code != http.StatusCreated || r.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay: %d %v", r.Code, r.Header())
		}
	}
}

// newServer serves the commands on an embedded store in a temporary directory, which wrap, if
// set, wraps for the server; it logs as in production: JSON lines, each written to a file as
// it is logged.
func newServer(tb testing.TB, wrap func(eventstore.Store) eventstore.Store) (*Server, *sqlite.Store) {
	tb.Helper()
	s, err := sqlite.Open(tb.TempDir(), sqlite.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	store := eventstore.Store(s)
	if wrap != nil {
		store = wrap(s)
	}
	logFile, err := os.Create(filepath.Join(tb.TempDir(), "log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { logFile.Close() })
	srv := &Server{Store: store, Feed: s, Orders: &command.Handler{Store: store}, Keys: &idempotency.Keys{Store: store}, IDs: command.NewOrderIDs(), Metrics: NewMetrics(),
		Log: slog.New(slog.NewJSONHandler(logFile, nil))}
	srv.Keys.Log = srv.Log
	return srv, s
}

// BenchmarkDecodeManyLines reads a create of about 1 MB of small lines as its route does:
// what a client can make the server do per body before the domain's limit on lines applies.
func BenchmarkDecodeManyLines(b *testing.B) {
	body := []byte(`{"customerId":"c-1","currency":"EUR","lines":[` + strings.Repeat(`{"sku":"s","quantity":1,"unitPrice":1},`, 22000) + `{"sku":"s","quantity":1,"unitPrice":1}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var c createBody
		if err := decode(body, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSmallCreate reads a create of two lines as its route does.
func BenchmarkDecodeSmallCreate(b *testing.B) {
	body := []byte(`{"customerId":"c-1","currency":"EUR","clientReference":"ref-1","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","name":"A thing","quantity":1,"unitPrice":500}]}`)
	b.ReportAllocs()
	for b.Loop() {
		var c createBody
		if err := decode(body, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate serves keyed creates, each with a new key, one after another, as the load
// harness's keyed creates do: the claim, the order's events and the outcome, on the embedded
// store. Its allocations and CPU profile are those of a create; its time is mostly the disk's.
// It reports what each create leaves in its key's stream: events, and their bytes (type, data
// and metadata).
func BenchmarkCreate(b *testing.B) {
	srv, s := newServer(b, nil)
	h := srv.Handler()
	body := `{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-create-"+strconv.Itoa(i))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	events, bytes := 0, 0
	filter := eventstore.Filter{StreamPrefixes: []string{idempotency.StreamPrefix}}
	for e, err := range s.ReadAll(context.Background(), eventstore.ReadAllOptions{Filter: filter}) {
		if err != nil {
			b.Fatal(err)
		}
		events, bytes = events+1, bytes+len(e.Type)+len(e.Data)+len(e.Metadata)
	}
	b.ReportMetric(float64(events)/float64(i), "key-events/op")
	b.ReportMetric(float64(bytes)/float64(i), "key-bytes/op")
}

// BenchmarkReplayOldestFirst replays keyed creates oldest first, as the load harness's replay
// phase does, with a key memory too small for all of them: the keys it holds are replayed from
// memory, the others read their key's stream. Run it with -benchtime of replayKeys (one pass):
//
//	go test -run '^$' -bench ReplayOldestFirst -benchtime 6000x -count 6 ./api/
func BenchmarkReplayOldestFirst(b *testing.B) {
	const replayKeys = 6000
	var reads atomic.Int64
	srv, _ := newServer(b, func(s eventstore.Store) eventstore.Store { return readCounter{s.(*sqlite.Store), &reads} })
	srv.Keys.RememberBytes = 4 << 20
	h := srv.Handler()
	send := func(i int) *httptest.ResponseRecorder {
		body := fmt.Sprintf(`{"customerId":"c-%06d","currency":"EUR","clientReference":"ref-%d","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`, i%1000, i)
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-replay-"+strconv.Itoa(i))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var g errgroup.Group
	g.SetLimit(64)
	for i := range replayKeys {
		g.Go(func() error {
			if r := send(i); r.Code != http.StatusCreated {
				return fmt.Errorf("create %d: %d %s", i, r.Code, r.Body)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	reads.Store(0)
	i := 0
	for b.Loop() {
		if r := send(i % replayKeys); r.Code != http.StatusCreated || r.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay %d: %d %v", i, r.Code, r.Header())
		}
		i++
	}
	b.ReportMetric(float64(srv.Keys.RememberedBytes())/float64(1<<20), "MiB-remembered")
	b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
}

// readCounter counts the stream reads of the embedded store.
type readCounter struct {
	*sqlite.Store
	n *atomic.Int64
}

func (r readCounter) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	r.n.Add(1)
	return r.Store.ReadStream(ctx, stream, opts)
}
