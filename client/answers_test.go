package client

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedirectsAreRefused: the API never redirects, so a 3xx is someone else's doing, and
// following it would send the API key, the body and the Idempotency-Key wherever it points.
// The client follows none, with its own http.Client or the caller's, and does not retry.
func TestRedirectsAreRefused(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		orderAnswer(false)(w)
	}))
	defer other.Close()
	clients := map[string]func() *http.Client{
		"default":  func() *http.Client { return nil },
		"caller's": func() *http.Client { return &http.Client{Timeout: time.Minute} },
		"caller's, follows": func() *http.Client {
			return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
		},
	}
	for _, status := range []int{301, 302, 303, 307, 308} {
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), status)
		}))
		defer front.Close()
		for name, hc := range clients {
			opts := []Option{WithAPIKey("secret"), WithBackoff(time.Millisecond, time.Millisecond)}
			own := hc()
			if own != nil {
				opts = append(opts, WithHTTPClient(own))
			}
			c := New(front.URL, opts...)
			_, meta, err := c.CreateOrder(t.Context(), CreateOrderRequest{CustomerID: "c", Currency: "EUR"})
			if !errors.Is(err, ErrRedirect) || meta.Attempts != 1 {
				t.Errorf("%d, %s client: command err %v after %d attempts; want ErrRedirect at once", status, name, err, meta.Attempts)
			}
			if _, meta, err = c.GetOrder(t.Context(), "o-1"); !errors.Is(err, ErrRedirect) || meta.Attempts != 1 {
				t.Errorf("%d, %s client: read err %v after %d attempts; want ErrRedirect at once", status, name, err, meta.Attempts)
			}
			if own != nil && name == "caller's" && own.CheckRedirect != nil {
				t.Errorf("%s client: New changed the caller's http.Client", name)
			}
		}
	}
	if n := elsewhere.Load(); n > 0 {
		t.Errorf("%d requests followed a redirect to another server", n)
	}
}
