package client

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// contractPath is the service's OpenAPI document, relative to this package's directory.
const contractPath = "../api/openapi.yaml"

func loadContract(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(contractPath)
	if err != nil {
		t.Fatalf("load %s: %v", contractPath, err)
	}
	return doc
}

// jsonFields are the JSON member names of struct type typ, each with whether it is left out
// when empty (omitempty or omitzero).
func jsonFields(typ reflect.Type) map[string]bool {
	fields := map[string]bool{}
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	}
	return fields
}

// TestWireTypesMatchTheContract fails when a wire type and its schema disagree: a member one
// has and the other has not, or a required member the client would leave out.
func TestWireTypesMatchTheContract(t *testing.T) {
	doc := loadContract(t)
	types := map[string]any{
		"Order": Order{}, "Line": Line{}, "DuplicateCharge": DuplicateCharge{}, "OrderPage": orderPage{},
		"CreateOrderRequest": CreateOrderRequest{}, "LineInput": LineInput{},
		"StartPaymentRequest": StartPaymentRequest{}, "ConfirmPaymentRequest": confirmPaymentRequest{},
		"ReasonRequest": reasonRequest{}, "ShipRequest": ShipRequest{}, "RequestRefundRequest": RequestRefundRequest{},
		"EmptyRequest": struct{}{}, "Events": eventPage{}, "Event": Event{}, "EventMetadata": EventMetadata{},
		"WebhookOrderPaid": WebhookPayload{}, "ChangeLineQuantityRequest": changeLineQuantityRequest{},
		"WebhookDeliveryPage": deliveryPage{}, "WebhookDelivery": DeliveryRecord{}, "WebhookAttempt": DeliveryAttempt{},
	}
	for name, v := range types {
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("schema %s: not in the contract", name)
			continue
		}
		fields := jsonFields(reflect.TypeOf(v))
		props := ref.Value.Properties
		for p := range props {
			if _, ok := fields[p]; !ok {
				t.Errorf("schema %s has %q; %T does not", name, p, v)
			}
		}
		for f, omitted := range fields {
			if _, ok := props[f]; !ok {
				t.Errorf("%T has %q; schema %s does not", v, f, name)
			}
			if omitted && slices.Contains(ref.Value.Required, f) {
				t.Errorf("%T leaves %q out when empty; schema %s requires it", v, f, name)
			}
		}
	}
	// A delivery's order is decoded into Order: every member it carries must be one of Order's.
	order := jsonFields(reflect.TypeFor[Order]())
	for p := range doc.Components.Schemas["WebhookOrder"].Value.Properties {
		if _, ok := order[p]; !ok {
			t.Errorf("schema WebhookOrder has %q; Order does not", p)
		}
	}
}

// decodeExample decodes a contract's example into a wire type, refusing unknown members; a
// resource must also pass the check that tells an answer from a stray JSON body.
func decodeExample(t *testing.T, what string, example, into any) {
	t.Helper()
	data, err := json.Marshal(example)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Errorf("%s: %v\n%s", what, err, data)
	} else if r, ok := into.(resource); ok && r.check() != nil {
		t.Errorf("%s: %v: the client would take it for a malformed answer", what, r.check())
	}
}

// TestContractExamplesDecode decodes the contract's examples into the wire types, so that a
// member the client does not know fails here.
func TestContractExamplesDecode(t *testing.T) {
	doc := loadContract(t)
	decode := func(what string, example, into any) { t.Helper(); decodeExample(t, what, example, into) }
	for name, ex := range doc.Components.Examples {
		decode("example "+name, ex.Value.Value, new(Order))
	}
	paths := map[string]any{
		"/v1/orders": new(orderPage), "/v1/orders/{id}/events": new(eventPage),
		"/v1/webhook-endpoints/{id}/deliveries": new(deliveryPage),
	}
	for path, into := range paths {
		mt := doc.Paths.Find(path).Get.Responses.Status(200).Value.Content.Get("application/json")
		decode("GET "+path, mt.Example, into)
	}
	bodies := map[string]any{
		"/v1/orders": new(CreateOrderRequest), "/v1/orders/{id}/lines": new(LineInput),
		"/v1/orders/{id}/payments": new(StartPaymentRequest), "/v1/orders/{id}/payments/{paymentId}/confirm": new(confirmPaymentRequest),
		"/v1/orders/{id}/cancel": new(reasonRequest), "/v1/orders/{id}/shipments": new(ShipRequest),
		"/v1/orders/{id}/refunds": new(RequestRefundRequest), "/v1/orders/{id}/payments/{paymentId}/fail": new(reasonRequest),
		"/v1/payments/{paymentId}/confirm": new(confirmPaymentRequest),
	}
	for path, into := range bodies {
		decode("POST "+path, doc.Paths.Find(path).Post.RequestBody.Value.Content.Get("application/json").Example, into)
	}
	put := doc.Paths.Find("/v1/orders/{id}/lines/{sku}").Put.RequestBody.Value.Content.Get("application/json").Example
	decode("PUT /v1/orders/{id}/lines/{sku}", put, new(changeLineQuantityRequest))
	for name, r := range doc.Components.Responses {
		mt := r.Value.Content.Get("application/problem+json")
		if mt == nil {
			continue
		}
		examples := map[string]any{name: mt.Example}
		for n, ex := range mt.Examples {
			examples[name+" "+n] = ex.Value.Value
		}
		for n, ex := range examples {
			if ex == nil {
				continue
			}
			var p Problem
			decode("problem "+n, ex, &p)
			if p.Code == "" || p.Extra != nil {
				t.Errorf("problem %s: %+v, want a code and no extra members", n, p)
			}
		}
	}
	hook := doc.Webhooks["orderEvent"].Post.RequestBody.Value.Content.Get("application/json").Example
	decode("webhook orderEvent", hook, new(WebhookPayload))
}

// problemType is an entry of the contract's x-problem-types.
type problemType struct {
	Code   string `json:"code"`
	Status int    `json:"status"`
}

func contractProblemTypes(t *testing.T) []problemType {
	t.Helper()
	data, err := json.Marshal(loadContract(t).Extensions["x-problem-types"])
	if err != nil {
		t.Fatal(err)
	}
	var types []problemType
	if err := json.Unmarshal(data, &types); err != nil || len(types) == 0 {
		t.Fatalf("x-problem-types: %v (%d types)", err, len(types))
	}
	return types
}

// TestClientImportsOnlyTheStandardLibraryAndULID keeps the package's promise to its users: a
// program that imports it compiles the standard library, ulid and the service's error kinds
// (fault, itself the standard library's alone), nothing else of the service's.
func TestClientImportsOnlyTheStandardLibraryAndULID(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{"github.com/acme/orders/client": true, "github.com/acme/orders/fault": true, "github.com/oklog/ulid/v2": true}
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		if std != "true" && !allowed[path] {
			t.Errorf("the client depends on %s, which is neither the standard library, ulid nor fault", path)
		}
	}
}
