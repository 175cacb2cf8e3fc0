package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
)

// BenchmarkReplay serves a retry of a completed command: the cheapest keyed request, and the
// one whose cost the load harness's replay phase measures against its baseline. The server
// logs as in production (JSON lines, to a discarded writer).
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
	srv.Drain(context.Background()) // the outcome recorded, so that every retry is a replay from memory
	b.ReportAllocs()
	for b.Loop() {
		if r := create(); r.Code != http.StatusCreated || r.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay: %d %v", r.Code, r.Header())
		}
	}
}

// newServer serves the commands on an embedded store in a temporary directory, which wrap, if
// set, wraps for the server; it logs as in production, to a discarded writer.
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
	srv := &Server{Store: store, Feed: s, Orders: &command.Handler{Store: store}, Keys: &idempotency.Keys{Store: store},
		Fingerprints: idempotency.NewFingerprints(100), IDs: command.NewOrderIDs(), Metrics: NewMetrics(),
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	srv.Keys.Observe = srv.ObserveKey
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

// BenchmarkCreate serves keyed creates, each with a new key, one after another, as the load
// harness's keyed creates do: the claim, the order's events and the outcome, on the embedded
// store. Its allocations and CPU profile are those of a create; its time is mostly the disk's.
func BenchmarkCreate(b *testing.B) {
	srv, _ := newServer(b, nil)
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
	srv.Drain(context.Background())
}
