package console

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/webhooks"
	"github.com/oklog/ulid/v2"
)

// The key page names what a key acted on: an order, linked to its page, or a webhook endpoint,
// which has no page here.
func TestKeyPageNamesTheKeysOrderOrEndpoint(t *testing.T) {
	f := newFixture(t)
	endpoint := webhooks.EndpointID("alice", "hook-1")
	order := ulid.Make().String()
	for key, subject := range map[string]string{"hook-1": endpoint, "create-1": order} {
		keys := &idempotency.Keys{Store: f.store}
		c, _, err := keys.Begin(context.Background(), idempotency.Request{Principal: "alice", Key: key, Method: "POST",
			Path: "/v1/webhook-endpoints", Fingerprint: "fp", OrderID: subject, Claimant: "test"})
		if err != nil {
			t.Fatal(err)
		}
		out := idempotency.Outcome{Status: 201, Body: "{}\n"}
		record, err := c.Record(out, idempotency.At{})
		if err == nil {
			_, err = eventstore.Write(context.Background(), f.store, record)
		}
		if err != nil {
			t.Fatal(err)
		}
		keys.Kept(context.Background(), c, out)
	}
	status, body := f.get(t, "alice", "/console/keys?key=hook-1")
	if status != http.StatusOK || !strings.Contains(body, "Webhook endpoint") || !strings.Contains(body, endpoint) ||
		strings.Contains(body, "/console/orders/"+endpoint) {
		t.Errorf("the registration's key: %d\n%s", status, body)
	}
	status, body = f.get(t, "alice", "/console/keys?key=create-1")
	if status != http.StatusOK || !strings.Contains(body, `href="/console/orders/`+order+`"`) || strings.Contains(body, "Webhook endpoint") {
		t.Errorf("the create's key: %d\n%s", status, body)
	}
}
