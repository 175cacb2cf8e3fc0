package client

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestDeliveriesSendsTheQueryAndDecodesThePage(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"deliveries":[
			{"id":"d1","type":"order.paid","orderId":"o1","revision":3,"status":"pending","tries":1,
			 "nextAttemptAt":"2026-12-01T08:05:00Z","attempts":[{"at":"2026-12-01T08:00:00Z","latencyMs":12.5,"error":"refused"}]},
			{"id":"d2","type":"order.shipped","orderId":"o2","revision":5,"status":"pending","tries":0,"attempts":[]}]}`))
	}))
	defer srv.Close()
	c := New(srv.URL)
	var ids []string
	var first DeliveryRecord
	for d, err := range c.Deliveries(t.Context(), "we/1", WithDeliveryStatus(DeliveryPending), WithDeliveryLimit(2)) {
		if err != nil {
			t.Fatal(err)
		}
		if ids = append(ids, d.ID); len(ids) == 1 {
			first = d
		}
	}
	if want := "GET /v1/webhook-endpoints/we%2F1/deliveries?limit=2&status=pending"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
	if len(ids) != 2 || ids[1] != "d2" {
		t.Errorf("deliveries %v, want d1 and d2", ids)
	}
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if !first.NextAttemptAt.Equal(at.Add(5*time.Minute)) || len(first.Attempts) != 1 ||
		!first.Attempts[0].At.Equal(at) || first.Attempts[0].LatencyMS != 12.5 || first.Attempts[0].Status != 0 {
		t.Errorf("first delivery decoded as %+v", first)
	}
}

func TestDeliveriesOfAnUnknownEndpointIsNotFound(t *testing.T) {
	c := New(ServiceURL)
	n := 0
	for _, err := range c.Deliveries(t.Context(), "we_k5q2yq3d7n4xw2c6r5m7t3v2zq") {
		if n++; !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	}
	if n != 1 {
		t.Errorf("%d values, want one error", n)
	}
}
