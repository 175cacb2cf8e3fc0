package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
)

// failingOutcomes is a store that appends to one stream at a time, as KurrentDB does (so a
// key's claim is written before its command runs), and fails to record a key's outcome while
// fail is set.
type failingOutcomes struct {
	eventstore.Store
	fail atomic.Bool
}

// SetMaxAge keeps no age: these tests do not reach a key's expiry.
func (f *failingOutcomes) SetMaxAge(context.Context, string, time.Duration) error { return nil }

func (f *failingOutcomes) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if f.fail.Load() && len(events) > 0 && events[len(events)-1].Type == idempotency.TypeCompleted {
		return eventstore.AppendResult{}, fmt.Errorf("%w: no space left on device", eventstore.ErrUnavailable)
	}
	return f.Store.Append(ctx, stream, expected, events...)
}

// An answer whose outcome cannot be recorded is not given: the client gets 503 with
// Retry-After, and the key is let go, so that its retry runs at once and then replays.
func TestAnswerNotRecordedIsNotGiven(t *testing.T) {
	store := &failingOutcomes{}
	srv, s := newServer(t, func(s eventstore.Store) eventstore.Store { store.Store = s; return store })
	h := srv.Handler()
	pay := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV/payments",
			strings.NewReader(`{"paymentId":"pay-1","amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	store.fail.Store(true)
	if r := pay(); r.Code != http.StatusServiceUnavailable || r.Header().Get("Retry-After") == "" {
		t.Fatalf("with the outcome unrecorded: %d %v %s; want 503 with Retry-After", r.Code, r.Header(), r.Body)
	}
	store.fail.Store(false)
	first := pay()
	if first.Code != http.StatusNotFound || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("the retry: %d %v %s; want the command run at once: 404, not a replay", first.Code, first.Header(), first.Body)
	}
	if again := pay(); again.Code != first.Code || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the next retry: %d %s; want the replay of %d %s", again.Code, again.Body, first.Code, first.Body)
	}
	var types []string
	for e, err := range s.ReadStream(context.Background(), idempotency.StreamName("local", "k1"), eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	want := []string{idempotency.TypeClaimed, idempotency.TypeReleased, idempotency.TypeClaimed, idempotency.TypeCompleted}
	if !slices.Equal(types, want) {
		t.Fatalf("key stream %v, want %v", types, want)
	}
}

// A retry of a key completed here is replayed from memory: by its very bytes, or by its
// fingerprint when its bytes differ (spacing); another body is refused.
func TestReplaysFromMemoryByBytesOrFingerprint(t *testing.T) {
	srv, _ := newServer(t, nil)
	h := srv.Handler()
	create := func(key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	body := `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"a","quantity":2,"unitPrice":250}]}`
	first := create("k1", body)
	if first.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Code, first.Body)
	}
	if r := create("k2", `{"customerId":"c-2","currency":"EUR"}`); r.Code != http.StatusCreated {
		t.Fatalf("second create: %d %s", r.Code, r.Body)
	}
	for name, b := range map[string]string{"same bytes": body, "spaced": strings.ReplaceAll(body, ",", ", ")} {
		r := create("k1", b)
		if r.Code != first.Code || r.Body.String() != first.Body.String() || r.Header().Get("Idempotent-Replayed") != "true" ||
			r.Header().Get("Location") != first.Header().Get("Location") || r.Header().Get("ETag") != first.Header().Get("ETag") {
			t.Errorf("%s: %d %v %s; want the replay of %d %v %s", name, r.Code, r.Header(), r.Body, first.Code, first.Header(), first.Body)
		}
	}
	if r := create("k1", strings.Replace(body, "c-1", "c-3", 1)); r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body.String(), "idempotency-key-reused") {
		t.Errorf("another body with the key: %d %s; want it refused", r.Code, r.Body)
	}
}

// countingStore counts the writes made to the store.
type countingStore struct {
	*sqlite.Store
	appends, multi atomic.Int64
}

func (c *countingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	c.appends.Add(1)
	return c.Store.Append(ctx, stream, expected, events...)
}

func (c *countingStore) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	c.multi.Add(1)
	return c.Store.MultiStreamAppend(ctx, appends...)
}

// A keyed create is one write: its key's claim and outcome, in one event, go with the order's
// events. A process that remembers nothing replays the answer from the store word for word,
// with the Log-Position of the order's last event, which the outcome could not hold.
func TestCreateRecordsItsOutcomeInItsOwnAppend(t *testing.T) {
	counted := &countingStore{}
	srv, s := newServer(t, func(s eventstore.Store) eventstore.Store { counted.Store = s.(*sqlite.Store); return counted })
	create := func(h http.Handler) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"customerId":"c-1","currency":"EUR","lines":[{"sku":"a","quantity":2,"unitPrice":250}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := create(srv.Handler())
	if first.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Code, first.Body)
	}
	if n, m := counted.appends.Load(), counted.multi.Load(); n != 0 || m != 1 {
		t.Fatalf("%d appends and %d multi-stream appends; want the one multi-stream append", n, m)
	}
	read := func(stream string) (events []eventstore.RecordedEvent) {
		for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{}) {
			if err != nil {
				t.Fatalf("%s: %v", stream, err)
			}
			events = append(events, e)
		}
		return events
	}
	key := read(idempotency.StreamName("local", "k1"))
	order := read(command.StreamName(strings.TrimPrefix(first.Header().Get("Location"), "/v1/orders/")))
	if len(key) != 1 || key[0].Type != idempotency.TypeRecorded || len(order) == 0 {
		t.Fatalf("key stream of %d events, order stream of %d; want one event, the claim with its outcome, and the order", len(key), len(order))
	}
	if strings.Contains(string(key[0].Data), "Log-Position") {
		t.Errorf("the key's event names a header: %s", key[0].Data)
	}
	if got, want := first.Header().Get("Log-Position"), fmt.Sprint(order[len(order)-1].Position.Commit); got != want {
		t.Fatalf("Log-Position %s; want the order's last event's, %s", got, want)
	}
	fresh, _ := newServer(t, nil)
	fresh.Store, fresh.Feed, fresh.Orders, fresh.Keys = s, s, &command.Handler{Store: s}, &idempotency.Keys{Store: s}
	again := create(fresh.Handler())
	if again.Code != first.Code || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay from the store: %d %s; want %d %s", again.Code, again.Body, first.Code, first.Body)
	}
	for _, h := range []string{"Location", "ETag", "Log-Position", "Content-Type"} {
		if again.Header().Get(h) != first.Header().Get(h) {
			t.Errorf("replay's %s %q, want %q", h, again.Header().Get(h), first.Header().Get(h))
		}
	}
}
