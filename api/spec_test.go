package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/acme/orders/api"
	"github.com/acme/orders/projections"
)

// contractProblems is the table of problem codes and statuses of the HTTP contract.
var contractProblems = map[string]int{
	"idempotency-key-missing":   400,
	"idempotency-key-invalid":   400,
	"malformed-request":         400,
	"provider-event-malformed":  400,
	"delivery-unverified":       401,
	"too-early":                 409,
	"invalid-command":           400,
	"unauthorized":              401,
	"forbidden":                 403,
	"not-found":                 404,
	"method-not-allowed":        405,
	"idempotency-key-in-flight": 409,
	"invalid-transition":        409,
	"concurrent-modification":   409,
	"rebuild-in-progress":       409,
	"precondition-failed":       412,
	"payload-too-large":         413,
	"unsupported-media-type":    415,
	"idempotency-key-reused":    422,
	"command-rejected":          422,
	"payment-id-taken":          422,
	"webhook-endpoint-invalid":  422,
	"webhook-url-refused":       422,
	"webhook-endpoint-limit":    422,
	"webhook-secret-withdrawn":  422,
	"headers-too-large":         431,
	"internal":                  500,
	"event-unreadable":          500,
	"unavailable":               503,
}

// contractRoutes are the routes of the HTTP contract, with their methods.
var contractRoutes = map[string][]string{
	"/v1/orders":                                               {"POST", "GET"},
	"/v1/reports/sales":                                        {"GET"},
	"/v1/orders/{id}":                                          {"GET"},
	"/v1/orders/{id}/events":                                   {"GET"},
	"/v1/orders/{id}/state":                                    {"GET"},
	"/v1/orders/{id}/lines":                                    {"POST"},
	"/v1/orders/{id}/lines/{sku}":                              {"PUT", "DELETE"},
	"/v1/orders/{id}/payments":                                 {"POST"},
	"/v1/orders/{id}/payments/{paymentId}/confirm":             {"POST"},
	"/v1/orders/{id}/payments/{paymentId}/fail":                {"POST"},
	"/v1/orders/{id}/cancel":                                   {"POST"},
	"/v1/orders/{id}/shipments":                                {"POST"},
	"/v1/orders/{id}/refunds":                                  {"POST"},
	"/v1/orders/{id}/refunds/{refundId}/complete":              {"POST"},
	"/v1/payments/{paymentId}/confirm":                         {"POST"},
	"/v1/idempotency-keys/{key}":                               {"GET"},
	"/v1/provider-events/{provider}":                           {"POST"},
	"/v1/provider-events":                                      {"GET"},
	"/admin/projections":                                       {"GET"},
	"/admin/projections/{name}/rebuild":                        {"POST"},
	"/openapi.yaml":                                            {"GET"},
	"/healthz":                                                 {"GET"},
	"/readyz":                                                  {"GET"},
	"/problems/{code}":                                         {"GET"},
	"/metrics":                                                 {"GET"},
	"/v1/webhook-endpoints":                                    {"POST", "GET"},
	"/v1/webhook-endpoints/{id}":                               {"GET", "DELETE"},
	"/v1/webhook-endpoints/{id}/disable":                       {"POST"},
	"/v1/webhook-endpoints/{id}/enable":                        {"POST"},
	"/v1/webhook-endpoints/{id}/rotate-secret":                 {"POST"},
	"/v1/webhook-endpoints/{id}/deliveries":                    {"GET"},
	"/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/retry": {"POST"},
}

// readModelRoutes answer from a read model: they take minPosition and may answer 503 with
// Retry-After when the read model has not caught up.
var readModelRoutes = []string{"/v1/orders", "/v1/orders/{id}", "/v1/idempotency-keys/{key}", "/v1/reports/sales", "/v1/provider-events"}

// signedPOSTs are the payment providers' deliveries: signed by the provider, keyed by its
// event id, read whatever their Content-Type, and about no order of the path.
var signedPOSTs = map[string]bool{"/v1/provider-events/{provider}": true}

// keylessPOSTs are naturally idempotent: repeating one has the effect of one, so they take no
// Idempotency-Key.
var keylessPOSTs = map[string]bool{
	"/admin/projections/{name}/rebuild":                        true,
	"/v1/webhook-endpoints/{id}/disable":                       true,
	"/v1/webhook-endpoints/{id}/enable":                        true,
	"/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/retry": true,
}

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("load api.OpenAPI: %v", err)
	}
	return doc
}

func TestOpenAPIIsValid(t *testing.T) {
	doc := load(t)
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("api.OpenAPI is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi: %s, want 3.1", doc.OpenAPI)
	}
}

func TestOpenAPIListsEveryProblemType(t *testing.T) {
	doc := load(t)

	raw, err := json.Marshal(doc.Extensions["x-problem-types"])
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		t.Fatalf("x-problem-types: %v", err)
	}
	got := make(map[string]int)
	for _, p := range listed {
		got[p.Code] = p.Status
	}
	for code, status := range contractProblems {
		if got[code] != status {
			t.Errorf("x-problem-types: %s has status %d, want %d", code, got[code], status)
		}
	}
	for code := range got {
		if _, ok := contractProblems[code]; !ok {
			t.Errorf("x-problem-types: %s is not in the contract", code)
		}
	}

	// Each error response is the one Problem schema, and lists the codes it carries, all of its
	// status; its examples are problems of those codes.
	byStatus := make(map[int][]string)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for s, ref := range op.Responses.Map() {
				mt := ref.Value.Content.Get("application/problem+json")
				if mt == nil {
					continue
				}
				name := method + " " + path + ": response " + s
				if mt.Schema.Ref != "#/components/schemas/Problem" {
					t.Errorf("%s: the schema is not #/components/schemas/Problem", name)
				}
				status := toInt(t, s)
				codes := problemCodes(t, name, ref.Value)
				for _, code := range codes {
					if contractProblems[code] != status {
						t.Errorf("%s: x-problem-codes lists %s, whose status is %d", name, code, contractProblems[code])
					}
					byStatus[status] = append(byStatus[status], code)
				}
				for _, ex := range mediaTypeExamples(mt) {
					p, _ := ex.(map[string]any)
					code, _ := p["type"].(string)
					if !slices.Contains(codes, strings.TrimPrefix(code, "/problems/")) || toInt(t, p["status"]) != status {
						t.Errorf("%s: example %v is not a problem of its codes and status", name, ex)
					}
				}
			}
		}
	}
	for code, status := range contractProblems {
		if status == http.StatusMethodNotAllowed || status == http.StatusRequestHeaderFieldsTooLarge {
			continue // answered before any route is matched; no operation documents it
		}
		if !slices.Contains(byStatus[status], code) {
			t.Errorf("no error response with status %d lists %s", status, code)
		}
	}
}

// problemCodes is the x-problem-codes list of the problem response named name.
func problemCodes(t *testing.T, name string, r *openapi3.Response) []string {
	t.Helper()
	raw, _ := r.Extensions["x-problem-codes"].([]any)
	var codes []string
	for _, c := range raw {
		code, ok := c.(string)
		if !ok {
			t.Errorf("%s: x-problem-codes holds %v, not a code", name, c)
		}
		codes = append(codes, code)
	}
	if len(codes) == 0 {
		t.Errorf("%s: no x-problem-codes", name)
	}
	return codes
}

// TestOpenAPIProblemIsTheServers checks that the Problem schema declares exactly the members
// of api.Problem, with plain types, so that a generated client decodes every problem into one
// typed struct; and that type is an open string, so that such a client reads codes added later.
func TestOpenAPIProblemIsTheServers(t *testing.T) {
	doc := load(t)
	problem := doc.Components.Schemas["Problem"].Value

	var fields []string
	st := reflect.TypeFor[api.Problem]()
	for i := range st.NumField() {
		if f := st.Field(i); f.IsExported() {
			fields = append(fields, strings.Split(f.Tag.Get("json"), ",")[0])
		}
	}
	declared := slices.Sorted(maps.Keys(problem.Properties))
	slices.Sort(fields)
	if !slices.Equal(declared, fields) {
		t.Errorf("Problem declares %v, the server sends %v", declared, fields)
	}
	if required := slices.Sorted(slices.Values(problem.Required)); !slices.Equal(required, fields) {
		t.Errorf("Problem requires %v, the server always sends %v", required, fields)
	}

	want := map[string]string{"type": "string", "title": "string", "status": "integer", "detail": "string"}
	for name, typ := range want {
		p := problem.Properties[name]
		if p == nil {
			continue // reported above
		}
		if !p.Value.Type.Is(typ) || p.Value.Enum != nil || p.Value.AllOf != nil || p.Value.OneOf != nil {
			t.Errorf("Problem.%s is not a plain %s", name, typ)
		}
	}
	if p := problem.Properties["type"]; p != nil {
		for code := range contractProblems {
			if !slices.Contains(p.Value.Examples, any("/problems/"+code)) {
				t.Errorf("Problem.type does not name /problems/%s in its examples", code)
			}
		}
	}
}

// TestOpenAPIGivesExamples checks that every request body and every response shows an
// example; doc.Validate (TestOpenAPIIsValid) checks each against its schema.
func TestOpenAPIGivesExamples(t *testing.T) {
	doc := load(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if len(mediaTypeExamples(mt)) == 0 {
						t.Errorf("%s %s: the %s request body has no example", method, path, ct)
					}
				}
			}
			for status, ref := range op.Responses.Map() {
				for ct, mt := range ref.Value.Content {
					if len(mediaTypeExamples(mt)) == 0 {
						t.Errorf("%s %s: the %s %s response has no example", method, path, status, ct)
					}
				}
			}
		}
	}
}

// mediaTypeExamples is the values of mt's example and examples.
func mediaTypeExamples(mt *openapi3.MediaType) []any {
	var values []any
	if mt.Example != nil {
		values = append(values, mt.Example)
	}
	for _, ex := range mt.Examples {
		values = append(values, ex.Value.Value)
	}
	return values
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := load(t)
	for path, methods := range contractRoutes {
		item := doc.Paths.Value(path)
		if item == nil {
			t.Errorf("%s is missing", path)
			continue
		}
		for _, m := range methods {
			if item.GetOperation(m) == nil {
				t.Errorf("%s %s is missing", m, path)
			}
		}
		if n := len(item.Operations()); n != len(methods) {
			t.Errorf("%s has %d operations, the contract %d", path, n, len(methods))
		}
	}
	if n, want := doc.Paths.Len(), len(contractRoutes); n != want {
		t.Errorf("%d paths, the contract has %d", n, want)
	}

	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			for status, ref := range op.Responses.Map() {
				if h := ref.Value.Headers["X-Request-Id"]; h == nil || !h.Value.Required {
					t.Errorf("%s: response %s does not require X-Request-Id", name, status)
				}
				if h := ref.Value.Headers["Retry-After"]; strings.HasPrefix(status, "5") && (h == nil || !h.Value.Required) {
					t.Errorf("%s: response %s does not require Retry-After", name, status)
				}
				if h := ref.Value.Headers["WWW-Authenticate"]; status == "401" && (h == nil || !h.Value.Required) {
					t.Errorf("%s: response 401 does not require WWW-Authenticate", name)
				}
			}
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			want := []int{400, 401, 500, 503}
			switch method {
			case "POST", "PUT", "DELETE":
				want = append(want, 409, 422)
			}
			if signedPOSTs[path] {
				want = []int{400, 401, 409, 413, 422, 500, 503}
			} else if method == "POST" || method == "PUT" {
				want = append(want, 413, 415)
			}
			if path != "/v1/orders" && !signedPOSTs[path] {
				want = append(want, 404)
				if method != "GET" {
					want = append(want, 412)
				}
			}
			for _, status := range want {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: no %d response", name, status)
				}
			}

			var key *openapi3.Parameter
			for _, p := range op.Parameters {
				if p.Value.In == "header" && p.Value.Name == "Idempotency-Key" {
					key = p.Value
				}
			}
			switch {
			case method == "GET" && key != nil:
				t.Errorf("%s takes an Idempotency-Key", name)
			case method == "POST" && (keylessPOSTs[path] || signedPOSTs[path]):
				if key != nil {
					t.Errorf("%s takes an Idempotency-Key; it is naturally idempotent", name)
				}
			case method == "POST" && (key == nil || !key.Required):
				t.Errorf("%s: Idempotency-Key is not required", name)
			case (method == "PUT" || method == "DELETE") && (key == nil || key.Required):
				t.Errorf("%s: Idempotency-Key is not optional", name)
			}
		}
	}
}

func TestOpenAPIDocumentsReadModels(t *testing.T) {
	doc := load(t)
	for _, path := range readModelRoutes {
		op := doc.Paths.Value(path).Get
		name := "GET " + path
		min := op.Parameters.GetByInAndName("query", "minPosition")
		if min == nil || min.Required || !min.Schema.Value.Type.Is("integer") {
			t.Errorf("%s: no optional integer query parameter minPosition", name)
		}
		// Past the wait bound the answer is 503 with Retry-After, never stale data.
		unavailable := op.Responses.Status(http.StatusServiceUnavailable)
		if unavailable == nil {
			continue // reported by TestOpenAPIDocumentsEveryRoute
		}
		if h := unavailable.Value.Headers["Retry-After"]; h == nil || !h.Value.Required {
			t.Errorf("%s: the 503 of a read model does not require Retry-After", name)
		}
	}

	read := doc.Paths.Value("/v1/orders/{id}").Get.Responses.Status(http.StatusOK).Value
	for _, h := range []string{"ETag", "Log-Position"} {
		if read.Headers[h] == nil || !read.Headers[h].Value.Required {
			t.Errorf("GET /v1/orders/{id}: 200 does not require %s", h)
		}
	}

	list := doc.Paths.Value("/v1/orders").Get
	for _, name := range []string{"status", "customerId", "limit", "cursor"} {
		if p := list.Parameters.GetByInAndName("query", name); p == nil || p.Required {
			t.Errorf("GET /v1/orders: no optional query parameter %s", name)
		}
	}
	if p := list.Parameters.GetByInAndName("query", "limit"); p != nil {
		s := p.Schema.Value
		if s.Min == nil || *s.Min != 1 || s.Max == nil || *s.Max != 500 || s.Default != any(50) && s.Default != any(50.0) {
			t.Errorf("GET /v1/orders: limit is not 1 to 500, default 50")
		}
	}
	// The status filter takes exactly the statuses an order can have.
	if p := list.Parameters.GetByInAndName("query", "status"); p != nil {
		filter := p.Schema.Value.Enum
		statuses := doc.Components.Schemas["Order"].Value.Properties["status"].Value.Enum
		if !slices.Equal(filter, statuses) {
			t.Errorf("GET /v1/orders: status takes %v, an order's status is one of %v", filter, statuses)
		}
	}
	page := list.Responses.Status(http.StatusOK).Value.Content.Get("application/json").Schema.Value
	if !slices.Equal(page.Required, []string{"orders"}) || page.Properties["orders"] == nil || page.Properties["next"] == nil {
		t.Errorf("GET /v1/orders: the page is not {orders, next?}")
	}

	// The projection states are the runner's.
	var states []any
	for _, s := range []projections.State{projections.StateCatchingUp, projections.StateLive,
		projections.StateRebuilding, projections.StateFailed, projections.StateStopped} {
		states = append(states, string(s))
	}
	status := doc.Components.Schemas["ProjectionStatus"].Value
	if got := status.Properties["state"].Value.Enum; !slices.Equal(got, states) {
		t.Errorf("ProjectionStatus.state is one of %v, the runner's states are %v", got, states)
	}

	for _, c := range []struct {
		method, path string
		statuses     []int
	}{
		{"GET", "/admin/projections", []int{200, 401, 500}},
		{"POST", "/admin/projections/{name}/rebuild", []int{202, 401, 404, 500}},
		{"POST", "/v1/payments/{paymentId}/confirm", []int{200, 404, 503}},
		{"GET", "/v1/idempotency-keys/{key}", []int{200, 404}},
	} {
		op := doc.Paths.Value(c.path).GetOperation(c.method)
		if op == nil {
			continue // reported by TestOpenAPIDocumentsEveryRoute
		}
		for _, status := range c.statuses {
			if op.Responses.Status(status) == nil {
				t.Errorf("%s %s: no %d response", c.method, c.path, status)
			}
		}
	}
}

func toInt(t *testing.T, v any) int {
	t.Helper()
	switch v := v.(type) {
	case int:
		return v
	case float64:
		return int(v)
	case string:
		n, err := strconv.Atoi(v)
		if err == nil {
			return n
		}
	}
	t.Fatalf("status %v (%T) is not an integer", v, v)
	return 0
}
