package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// keyedPost is a keyed POST to path with body, served by h.
func keyedPost(h http.Handler, path, key string, body io.Reader, size int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, body)
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A large body waits for room in the budget, then is answered 503 with Retry-After; small
// bodies never wait for it, and once the large body in flight is done, the next one is read.
func TestLargeBodiesWaitForRoom(t *testing.T) {
	srv, _ := newServer(t, nil)
	srv.BodyMemory = 64 << 10
	h := srv.Handler()
	large := `{"customerId":"c-1","currency":"EUR","clientReference":"` + strings.Repeat("x", 200<<10) + `"}`

	// A body that arrives slowly holds what it has sent, here the whole budget.
	r, w := io.Pipe()
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- keyedPost(h, "/v1/orders", "slow", r, int64(len(large))) }()
	if _, err := io.WriteString(w, large[:150<<10]); err != nil { // returns once the server read it
		t.Fatal(err)
	}

	busy := keyedPost(h, "/v1/orders", "large", strings.NewReader(large), int64(len(large)))
	if busy.Code != http.StatusServiceUnavailable || busy.Header().Get("Retry-After") == "" ||
		!strings.Contains(busy.Body.String(), "/problems/unavailable") {
		t.Errorf("a large body while the budget is full: %d %v %s; want 503 unavailable with Retry-After", busy.Code, busy.Header(), busy.Body)
	}
	small := `{"customerId":"c-1","currency":"EUR"}`
	if rec := keyedPost(h, "/v1/orders", "small", strings.NewReader(small), int64(len(small))); rec.Code != http.StatusCreated {
		t.Errorf("a small body while the budget is full: %d %s; want 201", rec.Code, rec.Body)
	}

	if _, err := io.WriteString(w, large[150<<10:]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Both are read and decided: the domain refuses a client reference that long.
	if rec := <-first; rec.Code != http.StatusBadRequest {
		t.Errorf("the slow body: %d %s; want 400", rec.Code, rec.Body)
	}
	if rec := keyedPost(h, "/v1/orders", "large", strings.NewReader(large), int64(len(large))); rec.Code != http.StatusBadRequest {
		t.Errorf("a large body once the budget is free: %d %s; want 400", rec.Code, rec.Body)
	}
	if b := srv.bodyBudget(); !b.sem.TryAcquire(b.size) {
		t.Error("some of the budget still taken after every request; want none")
	}
}

// A body that is not the route's command is refused as such, before its key is looked at: it
// is not fingerprinted, so it is not "another request with the same key" either.
func TestBodyIsCheckedBeforeItsKey(t *testing.T) {
	srv, _ := newServer(t, nil)
	h := srv.Handler()
	good := `{"customerId":"c-1","currency":"EUR"}`
	if rec := keyedPost(h, "/v1/orders", "k", strings.NewReader(good), -1); rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []string{
		`{"customerId":"c-1","currency":"EUR","discount":10}`,
		`{"customerId":"c-1","currency":"EUR","lines":` + strings.Repeat(`[1,`, 1000) + `]`,
	} {
		rec := keyedPost(h, "/v1/orders", "k", strings.NewReader(bad), -1)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "/problems/malformed-request") {
			t.Errorf("%.60s… with a used key: %d %s; want 400 malformed-request", bad, rec.Code, rec.Body)
		}
	}
	// The retry of the good request is still a replay, by chunks or not.
	rec := keyedPost(h, "/v1/orders", "k", bytes.NewReader([]byte(good)), int64(len(good)))
	if rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: %d %v %s; want the replayed 201", rec.Code, rec.Header(), rec.Body)
	}
}

// A body over the limit is read on after its 413, up to drainBody, announced or chunked: a
// client still sending would otherwise meet a reset instead of the answer. A client that
// waits for 100 Continue before it sends its body, and was answered first, is not read from.
func TestBodyOverTheLimitIsDrained(t *testing.T) {
	srv, _ := newServer(t, nil)
	h := srv.Handler()
	for _, tc := range []struct {
		name       string
		size       int64
		announced  bool
		expect     bool
		wantUnread int64
	}{
		{"announced", 2 << 20, true, false, 0},
		{"chunked", 2 << 20, false, false, 0},
		{"announced, past the drain", maxBody + drainBody + 100, true, false, maxBody + 100},
		{"chunked, past the drain", maxBody + drainBody + 100, false, false, 99},
		{"waiting for 100 Continue", 2 << 20, true, true, 2 << 20},
	} {
		body := &io.LimitedReader{R: zeros{}, N: tc.size}
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", body)
		req.ContentLength = -1
		if tc.announced {
			req.ContentLength = tc.size
		}
		if tc.expect {
			req.Header.Set("Expect", "100-continue")
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "large")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "/problems/payload-too-large") ||
			rec.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d %v %s; want 413 payload-too-large, Connection: close", tc.name, rec.Code, rec.Header(), rec.Body)
		}
		if body.N != tc.wantUnread {
			t.Errorf("%s: %d of %d bytes left unread; want %d", tc.name, body.N, tc.size, tc.wantUnread)
		}
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
