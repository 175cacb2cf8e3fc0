package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/idempotency"
	"github.com/labstack/echo/v4"
)

// fuzzRoutes are the command routes whose requests FuzzCommandBody decodes.
var fuzzRoutes = []struct {
	name string
	rt   route
	// noBody marks a route that does not read its body: any body is accepted, and a keyed
	// request is then refused by the fingerprint if the body is not JSON.
	noBody bool
}{
	{"create", createOrder, false}, {"add-line", addLine, false}, {"change-line", changeLine, false},
	{"remove-line", removeLine, true}, {"start-payment", startPayment, false}, {"confirm-payment", confirmPayment, false},
	{"fail-payment", failPayment, false}, {"cancel", cancelOrder, false}, {"ship", ship, false},
	{"request-refund", requestRefund, false}, {"complete-refund", completeRefund, false},
}

// bugTrailingData is a server bug that this fuzz target found: looking for data after the
// JSON value with json.Decoder.More, which reports false before a ']' or '}', takes
// `{"reason":"x"}]` for `{"reason":"x"}`.
const bugTrailingData = "a body with ']' or '}' after its JSON object is accepted, not refused as malformed"

// FuzzCommandBody decodes arbitrary bodies and path values as each command route does. A
// refusal must be a 400 malformed-request; a body that is accepted must be one JSON value,
// fingerprintable, and make a command that the domain decides on an order (accepting or
// refusing it) without a 5xx. Seeds: testdata/fuzz/FuzzCommandBody (route index, body, path
// value).
func FuzzCommandBody(f *testing.F) {
	const orderID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	created, err := order.Decide(order.State{}, order.CreateOrder{OrderID: orderID, CustomerID: "c-1", Currency: "EUR",
		Lines: []order.AddLine{{SKU: "sku-1", Quantity: 2, UnitPrice: order.Money{Amount: 1000, Currency: "EUR"}}}}, at)
	if err != nil {
		f.Fatal(err)
	}
	var existing order.State
	for _, e := range created {
		existing = order.Evolve(existing, e)
	}
	e := echo.New()

	f.Fuzz(func(t *testing.T, which uint8, body []byte, param string) {
		r := fuzzRoutes[int(which)%len(fuzzRoutes)]
		c := e.NewContext(httptest.NewRequest(http.MethodPost, "/", nil), httptest.NewRecorder())
		c.SetParamNames("id", "sku", "paymentId", "refundId")
		c.SetParamValues(orderID, param, param, param)
		parsed, err := r.rt.parse(c, body)
		if err != nil {
			if p := problemOf(err); p.Status != http.StatusBadRequest || p.Type != "/problems/malformed-request" {
				t.Fatalf("%s refused %q with %v, answered %d %s; want 400 malformed-request", r.name, body, err, p.Status, p.Type)
			}
			return
		}
		if create, ok := parsed.(order.CreateOrder); ok {
			create.OrderID = orderID // as command.Handler.Plan sets it
			parsed = create
		}
		if got := parsed.CommandName(); got != r.rt.name {
			t.Fatalf("%s made a %s command; its route says %s", r.name, got, r.rt.name)
		}
		switch {
		case r.noBody:
		case len(bytes.TrimSpace(body)) > 0 && !json.Valid(body):
			t.Fatalf("%s accepted %q, which is not one JSON value: %s", r.name, body, bugTrailingData)
		default:
			if _, err := idempotency.Fingerprint(http.MethodPost, "/v1/orders", body); err != nil {
				t.Fatalf("%s accepted %q, which cannot be fingerprinted: %v", r.name, body, err)
			}
		}
		state := existing
		if r.rt.create {
			state = order.State{}
		}
		cmd := order.InCurrency(parsed, state.Currency)
		_, err = order.Decide(state, cmd, at)
		var oe *order.Error
		if err != nil && !errors.As(err, &oe) {
			t.Fatalf("Decide(%#v): %T %v, want an *order.Error", cmd, err, err)
		}
		if err != nil {
			if p := problemOf(err); p.Status >= 500 {
				t.Fatalf("Decide(%#v) refused it with %v, answered %d", cmd, err, p.Status)
			}
		}
	})
}
