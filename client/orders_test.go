package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestCommandRequests checks each command's method, path, body and headers as the contract
// names them, retried once after a 503 with the same Idempotency-Key.
func TestCommandRequests(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name   string
		call   func(context.Context, *Client) (Order, Meta, error)
		target string // method and escaped path
		body   string // "" for none
	}{
		{"change line quantity", func(ctx context.Context, c *Client) (Order, Meta, error) {
			return c.ChangeLineQuantity(ctx, "o/1", "a/b", 3)
		}, "PUT /v1/orders/o%2F1/lines/a%2Fb", `{"quantity":3}`},
		{"remove line", func(ctx context.Context, c *Client) (Order, Meta, error) {
			return c.RemoveLine(ctx, "o/1", "a/b")
		}, "DELETE /v1/orders/o%2F1/lines/a%2Fb", ""},
		{"fail payment", func(ctx context.Context, c *Client) (Order, Meta, error) {
			return c.FailPayment(ctx, "o-1", "pay 7", "card declined")
		}, "POST /v1/orders/o-1/payments/pay%207/fail", `{"reason":"card declined"}`},
		{"confirm payment by id", func(ctx context.Context, c *Client) (Order, Meta, error) {
			return c.ConfirmPaymentByID(ctx, "pay/7", 2500)
		}, "POST /v1/payments/pay%2F7/confirm", `{"amount":2500}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			answers := []func(http.ResponseWriter){problemAnswer(503, "unavailable", "0"), orderAnswer(false)}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got = append(got, r.Method+" "+r.URL.EscapedPath()+" "+string(body)+" key="+r.Header.Get("Idempotency-Key")+
					" type="+r.Header.Get("Content-Type"))
				answers[min(len(got), len(answers))-1](w)
			}))
			defer srv.Close()
			c := New(srv.URL, WithBackoff(time.Millisecond, time.Millisecond))
			_, meta, err := tt.call(ctx, c)
			if err != nil || meta.Attempts != 2 || meta.LogPosition != 42 || meta.IdempotencyKey == "" {
				t.Fatalf("err %v, meta %+v; want success after 2 attempts at position 42, with a key", err, meta)
			}
			contentType := ""
			if tt.body != "" {
				contentType = "application/json"
			}
			want := tt.target + " " + tt.body + " key=" + meta.IdempotencyKey + " type=" + contentType
			if len(got) != 2 || got[0] != want || got[1] != want {
				t.Errorf("requests %q, want twice %q", got, want)
			}
		})
	}
}
