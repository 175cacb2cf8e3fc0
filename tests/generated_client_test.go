package tests

import (
	"bytes"
	"context"
	"testing"

	"github.com/acme/orders/tests/apiclient"
)

// TestGeneratedClient drives the real binary through the client that oapi-codegen generates
// from api/openapi.yaml: a create, its replay, and the same key with another body, whose
// problem the client decodes into its typed Problem. apitest checks every exchange.
func TestGeneratedClient(t *testing.T) {
	s := startServer(t, "")
	c, err := apiclient.NewClientWithResponses(s.url(""), apiclient.WithHTTPClient(s.client(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()

	params := &apiclient.CreateOrderParams{IdempotencyKey: "generated-client-create"}
	body := apiclient.CreateOrderJSONRequestBody{
		CustomerId: "c-1",
		Currency:   "EUR",
		Lines:      &[]apiclient.LineInput{{Sku: "sku-1", Quantity: 2, UnitPrice: 1250}},
	}
	first, err := c.CreateOrderWithResponse(ctx, params, body)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode() != 201 || first.JSON201 == nil {
		t.Fatalf("create: %d %s", first.StatusCode(), first.Body)
	}
	if o := first.JSON201; o.Status != apiclient.OrderStatusCreated || o.Total != 2500 || len(o.Lines) != 1 {
		t.Errorf("create: order %+v, want created with one line, total 2500", o)
	}
	if h := first.Headers201; h.IdempotentReplayed != nil || h.Location != "/v1/orders/"+first.JSON201.Id {
		t.Errorf("create: Idempotent-Replayed %v, Location %q", h.IdempotentReplayed, h.Location)
	}

	replay, err := c.CreateOrderWithResponse(ctx, params, body)
	if err != nil {
		t.Fatal(err)
	}
	if replay.StatusCode() != 201 || replay.JSON201 == nil {
		t.Fatalf("replay: %d %s", replay.StatusCode(), replay.Body)
	}
	if r := replay.Headers201.IdempotentReplayed; r == nil || *r != "true" {
		t.Errorf("replay: Idempotent-Replayed %v, want true", r)
	}
	if !bytes.Equal(replay.Body, first.Body) {
		t.Errorf("replay: body\n%s\nthe first answer's\n%s", replay.Body, first.Body)
	}
	if replay.Headers201.Location != first.Headers201.Location || replay.Headers201.ETag != first.Headers201.ETag {
		t.Errorf("replay: Location %q, ETag %q; the first answer's %q, %q",
			replay.Headers201.Location, replay.Headers201.ETag, first.Headers201.Location, first.Headers201.ETag)
	}

	body.Currency = "USD"
	reused, err := c.CreateOrderWithResponse(ctx, params, body)
	if err != nil {
		t.Fatal(err)
	}
	p := reused.ApplicationproblemJSON422
	if reused.StatusCode() != 422 || p == nil || p.Type != "/problems/idempotency-key-reused" || p.Status != 422 {
		t.Errorf("same key, another body: %d %s, want the typed problem idempotency-key-reused", reused.StatusCode(), reused.Body)
	}
}
