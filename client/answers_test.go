package client

import (
	"context"
	"errors"
	"io"
	"iter"
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

// TestMalformedSuccessIsAnError: a 2xx answer that is not JSON, or not the resource the call
// promises, is ErrMalformedAnswer, and the call is not retried.
func TestMalformedSuccessIsAnError(t *testing.T) {
	order := `{"id":"o-1","customerId":"c","currency":"EUR","status":"created","lines":[],"version":1}`
	calls := map[string]func(context.Context, *Client) error{
		"command": func(ctx context.Context, c *Client) error {
			_, _, err := c.Cancel(ctx, "o-1", "r")
			return err
		},
		"get order": func(ctx context.Context, c *Client) error {
			_, _, err := c.GetOrder(ctx, "o-1")
			return err
		},
		"list orders": func(ctx context.Context, c *Client) error { return firstErr(c.ListOrders(ctx, ListOptions{})) },
		"events":      func(ctx context.Context, c *Client) error { return firstErr(c.Events(ctx, "o-1")) },
		"deliveries":  func(ctx context.Context, c *Client) error { return firstErr(c.Deliveries(ctx, "ep-1")) },
	}
	answers := []struct {
		name, contentType, body string
	}{
		{"html", "text/html", `{}`},
		{"no content type", "", order},
		{"empty object", "application/json", `{}`},
		{"null", "application/json", `null`},
		{"not json", "application/json", `<html></html>`},
		{"order without id", "application/json", `{"customerId":"c","currency":"EUR","status":"created","version":1}`},
		{"a page's member without id", "application/json", `{"orders":[{}],"events":[{}],"deliveries":[{}],"status":"created"}`},
	}
	for _, a := range answers {
		for name, call := range calls {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				if a.contentType != "" {
					w.Header().Set("Content-Type", a.contentType)
				}
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, a.body)
			}))
			err := call(t.Context(), New(srv.URL, WithBackoff(time.Millisecond, time.Millisecond)))
			srv.Close()
			if !errors.Is(err, ErrMalformedAnswer) || n.Load() != 1 {
				t.Errorf("%s answered %s: err %v after %d requests; want ErrMalformedAnswer at once", name, a.name, err, n.Load())
			}
		}
	}
}

// TestWellFormedSuccess: the content type may carry parameters.
func TestWellFormedSuccess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"id":"o-1","customerId":"c","currency":"EUR","status":"created","lines":[],"version":1}`)
	}))
	defer srv.Close()
	if o, _, err := New(srv.URL).GetOrder(t.Context(), "o-1"); err != nil || o.ID != "o-1" {
		t.Errorf("order %+v, err %v; want o-1", o, err)
	}
}

// firstErr is the first error of a sequence, or nil.
func firstErr[V any](seq iter.Seq2[V, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}
