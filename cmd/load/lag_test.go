package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/tests/load"
)

// TestProbeLag runs the probe against a fake server whose read model answers 503 once before
// it catches up, and checks what the probe makes of it.
func TestProbeLag(t *testing.T) {
	var behind atomic.Bool
	behind.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/v1/orders/o1")
		w.Header().Set("Log-Position", "7")
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("POST /v1/orders/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		// A replay of an older command: the probe must not time it from now.
		w.Header().Set("Log-Position", "3")
		w.Header().Set("Idempotent-Replayed", "true")
	})
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "o1" || r.URL.Query().Get("minPosition") != "7" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if behind.Swap(false) {
			http.Error(w, "behind", http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("GET /admin/projections", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"projections":[{"name":"orders","state":"live","lagEvents":3,"lagSeconds":0.5},{"name":"lookups","lagEvents":0}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	watch := &ackWatch{next: load.NewTransport(1)}
	client := &http.Client{Transport: watch}
	for _, path := range []string{"/v1/orders", "/v1/orders/o1/cancel"} {
		res, err := client.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}

	stop := make(chan struct{})
	time.AfterFunc(5*lagEvery, func() { close(stop) })
	l := probeLag(context.Background(), stop, srv.URL, "k", watch)

	if l.Samples != 1 || l.Failed != 0 || len(l.Errors) != 0 {
		t.Errorf("samples %d, failed %d %q; want the one acknowledged command sampled once", l.Samples, l.Failed, l.Errors)
	}
	if l.StatusPolls == 0 || l.StatusErrors != 0 {
		t.Errorf("status polls %d, failed %d: %s", l.StatusPolls, l.StatusErrors, l.StatusError)
	}
	want := []ProjectionLag{{Name: "lookups"}, {Name: "orders", MaxLagEvents: 3, MaxLagSeconds: 0.5}}
	if !slices.Equal(l.Projections, want) {
		t.Errorf("projections %+v, want %+v", l.Projections, want)
	}
	if !l.met(time.Second) {
		t.Errorf("target missed with %+v", l)
	}
}

func TestOrderOf(t *testing.T) {
	for _, c := range []struct{ path, location, want string }{
		{"/v1/orders", "/v1/orders/01J", "01J"},
		{"/v1/orders/01J/lines/sku-1", "", "01J"},
		{"/v1/orders/01J", "", "01J"},
		{"/v1/payments/p1/confirm", "", ""},
	} {
		if got := orderOf(c.path, c.location); got != c.want {
			t.Errorf("orderOf(%q, %q) = %q, want %q", c.path, c.location, got, c.want)
		}
	}
}
