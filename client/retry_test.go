package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestRetryPolicy(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		retry      bool
	}{
		{"key in flight", 409, "1", true},
		{"concurrent modification, not kept for the key", 409, "1", true},
		{"provider event too early", 409, "1", true},
		{"too many requests", 429, "", true},
		{"unavailable", 503, "1", true},
		{"internal", 500, "1", true},
		{"bad gateway from a proxy", 502, "", true},
		{"invalid transition", 409, "", false},
		{"rebuild in progress", 409, "", false},
		{"malformed", 400, "", false},
		{"unauthorized", 401, "", false},
		{"forbidden", 403, "", false},
		{"not found", 404, "", false},
		{"precondition failed", 412, "", false},
		{"key reused", 422, "", false},
		{"rejected", 422, "", false},
		{"teapot", 418, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.retryAfter != "" {
				h.Set("Retry-After", tt.retryAfter)
			}
			if got := Retryable(tt.status, h); got != tt.retry {
				t.Errorf("Retryable(%d, Retry-After %q) = %v, want %v", tt.status, tt.retryAfter, got, tt.retry)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	base, maxDelay := 100*time.Millisecond, 5*time.Second
	lowest := func(int64) int64 { return 0 }
	highest := func(n int64) int64 { return n - 1 }
	tests := []struct {
		n          int
		retryAfter time.Duration
		min, max   time.Duration
	}{
		{1, 0, 0, 100 * time.Millisecond},
		{2, 0, 0, 200 * time.Millisecond},
		{4, 0, 0, 800 * time.Millisecond},
		{7, 0, 0, 5 * time.Second}, // 6.4 s capped
		{60, 0, 0, 5 * time.Second},
		{1, time.Second, time.Second, time.Second},              // Retry-After wins over a shorter back-off
		{7, time.Second, time.Second, 5 * time.Second},          // and a longer back-off wins over it
		{1, 30 * time.Second, 5 * time.Second, 5 * time.Second}, // Retry-After is capped at maxDelay
		{1, math.MaxInt32 * time.Second, 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		lo := backoff(tt.n, base, maxDelay, tt.retryAfter, lowest)
		hi := backoff(tt.n, base, maxDelay, tt.retryAfter, highest)
		if lo != tt.min || hi != tt.max {
			t.Errorf("backoff(%d, Retry-After %v) in [%v, %v], want [%v, %v]", tt.n, tt.retryAfter, lo, hi, tt.min, tt.max)
		}
		// With the real source every draw stays within the bounds, and they are not all equal.
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(tt.n, base, maxDelay, tt.retryAfter, rand.Int64N)
			if d < tt.min || d > tt.max {
				t.Fatalf("backoff(%d, Retry-After %v) = %v, outside [%v, %v]", tt.n, tt.retryAfter, d, tt.min, tt.max)
			}
			seen[d] = true
		}
		if tt.min != tt.max && len(seen) < 10 {
			t.Errorf("backoff(%d): %d distinct values in 200 draws: no jitter", tt.n, len(seen))
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "1": time.Second, "7": 7 * time.Second, "-1": 0, "soon": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0} {
		if got := retryAfter(http.Header{"Retry-After": {v}}); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// flaky answers each request with the next of answers (then the last one again), and
// records the Idempotency-Key of every request.
type flaky struct {
	mu      sync.Mutex
	answers []func(http.ResponseWriter)
	keys    []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	a := f.answers[min(len(f.keys), len(f.answers))-1]
	f.mu.Unlock()
	a(w)
}

func problemAnswer(status int, code, retryAfter string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"/problems/%s","title":"t","status":%d,"detail":"d"}`, code, status)
	}
}

func orderAnswer(replayed bool) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("ETag", `"v2"`)
		w.Header().Set("Log-Position", "42")
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"01JD3Z8Q7T5V9W2X4Y6Z8A0B1C","customerId":"c","currency":"EUR","status":"created","lines":[],"total":0,"paid":0,"refunded":0,"version":2,"createdAt":"2026-11-29T06:00:00Z","updatedAt":"2026-11-29T06:00:00Z"}`)
	}
}

func TestCommandRetriesWithTheSameKey(t *testing.T) {
	f := &flaky{answers: []func(http.ResponseWriter){
		problemAnswer(503, "unavailable", "0"),
		problemAnswer(409, "idempotency-key-in-flight", "0"),
		func(w http.ResponseWriter) { w.WriteHeader(429) },
		problemAnswer(409, "concurrent-modification", "0"),
		orderAnswer(true),
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := New(srv.URL, WithBackoff(time.Millisecond, 5*time.Millisecond))
	o, meta, err := c.CreateOrder(t.Context(), CreateOrderRequest{CustomerID: "c", Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Attempts != 5 || !meta.Replayed || meta.LogPosition != 42 || meta.ETag != `"v2"` || o.Version != 2 {
		t.Errorf("meta %+v, version %d; want 5 attempts, replayed, position 42, ETag \"v2\", version 2", meta, o.Version)
	}
	for _, k := range f.keys {
		if k != meta.IdempotencyKey || k == "" {
			t.Fatalf("keys %q: want every attempt to carry %q", f.keys, meta.IdempotencyKey)
		}
	}
}

func TestCommandStopsAtFinalAnswersAndMaxAttempts(t *testing.T) {
	for _, tt := range []struct {
		name     string
		answer   func(http.ResponseWriter)
		attempts int
		want     error
	}{
		{"rejected", problemAnswer(422, "command-rejected", ""), 1, ErrRejected},
		{"invalid transition", problemAnswer(409, "invalid-transition", ""), 1, ErrRejected},
		{"always unavailable", problemAnswer(503, "unavailable", "0"), 3, ErrUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&flaky{answers: []func(http.ResponseWriter){tt.answer}})
			defer srv.Close()
			c := New(srv.URL, WithMaxAttempts(3), WithBackoff(time.Millisecond, time.Millisecond))
			_, meta, err := c.Cancel(t.Context(), "o-1", "r", WithIdempotencyKey("k-1"))
			if !errors.Is(err, tt.want) || meta.Attempts != tt.attempts || meta.IdempotencyKey != "k-1" {
				t.Errorf("err %v, meta %+v; want %v after %d attempts with key k-1", err, meta, tt.want, tt.attempts)
			}
		})
	}
}

// TestRetryAfterIsCapped: a Retry-After of 68 years, on a context without a deadline, is waited
// no longer than the back-off ceiling; the watchdog only ends a test that would otherwise hang.
func TestRetryAfterIsCapped(t *testing.T) {
	srv := httptest.NewServer(&flaky{answers: []func(http.ResponseWriter){
		problemAnswer(503, "unavailable", strconv.Itoa(math.MaxInt32)), orderAnswer(false)}})
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	c := New(srv.URL, WithBackoff(time.Millisecond, 10*time.Millisecond))
	_, meta, err := c.CreateOrder(ctx, CreateOrderRequest{CustomerID: "c", Currency: "EUR"})
	if err != nil || meta.Attempts != 2 {
		t.Errorf("err %v after %d attempts: want the order on the second attempt, after a capped wait", err, meta.Attempts)
	}
}

// TestRetryStopsBeforeTheDeadline: a wait that would pass the deadline is not begun; the call
// returns the 503 at once, as its problem.
func TestRetryStopsBeforeTheDeadline(t *testing.T) {
	for _, after := range []string{"10", strconv.Itoa(math.MaxInt32)} {
		srv := httptest.NewServer(&flaky{answers: []func(http.ResponseWriter){problemAnswer(503, "unavailable", after)}})
		defer srv.Close()
		c := New(srv.URL)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, meta, err := c.GetOrder(ctx, "o-1")
		p, ok := errors.AsType[*Problem](err)
		if !ok || p.Status != 503 || meta.Attempts != 1 || time.Since(start) > 900*time.Millisecond {
			t.Errorf("Retry-After %s: err %v after %d attempts in %v: want the 503 at once, a wait of 5 s passing the deadline",
				after, err, meta.Attempts, time.Since(start))
		}
	}
}

func TestIfMatchAndMinPosition(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" If-Match="+r.Header.Get("If-Match"))
		mu.Unlock()
		orderAnswer(false)(w)
	}))
	defer srv.Close()
	s := New(srv.URL).Session()
	if _, _, err := s.AddLine(t.Context(), "a/b", LineInput{SKU: "x", Quantity: 1, UnitPrice: 1}, WithIfMatch(3)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetOrder(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetOrder(t.Context(), "a/b", WithMinPosition(50)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`POST /v1/orders/a%2Fb/lines If-Match="v3"`,
		`GET /v1/orders/a%2Fb?minPosition=42 If-Match=`,
		`GET /v1/orders/a%2Fb?minPosition=50 If-Match=`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || s.Position() != 42 {
		t.Errorf("requests\n%q\nwant\n%q; session position %d, want 42", got, want, s.Position())
	}
}
