package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/acme/orders/api"
)

// contractProblems is the table of problem codes and statuses of the HTTP contract.
var contractProblems = map[string]int{
	"idempotency-key-missing":   400,
	"idempotency-key-invalid":   400,
	"malformed-request":         400,
	"invalid-command":           400,
	"unauthorized":              401,
	"forbidden":                 403,
	"not-found":                 404,
	"method-not-allowed":        405,
	"idempotency-key-in-flight": 409,
	"invalid-transition":        409,
	"concurrent-modification":   409,
	"precondition-failed":       412,
	"payload-too-large":         413,
	"unsupported-media-type":    415,
	"idempotency-key-reused":    422,
	"command-rejected":          422,
	"internal":                  500,
	"unavailable":               503,
}

// contractRoutes are the routes of the HTTP contract, with their methods.
var contractRoutes = map[string][]string{
	"/v1/orders":                                   {"POST"},
	"/v1/orders/{id}":                              {"GET"},
	"/v1/orders/{id}/events":                       {"GET"},
	"/v1/orders/{id}/lines":                        {"POST"},
	"/v1/orders/{id}/lines/{sku}":                  {"PUT", "DELETE"},
	"/v1/orders/{id}/payments":                     {"POST"},
	"/v1/orders/{id}/payments/{paymentId}/confirm": {"POST"},
	"/v1/orders/{id}/payments/{paymentId}/fail":    {"POST"},
	"/v1/orders/{id}/cancel":                       {"POST"},
	"/v1/orders/{id}/shipments":                    {"POST"},
	"/v1/orders/{id}/refunds":                      {"POST"},
	"/v1/orders/{id}/refunds/{refundId}/complete":  {"POST"},
	"/openapi.yaml":                                {"GET"},
	"/healthz":                                     {"GET"},
	"/readyz":                                      {"GET"},
	"/problems/{code}":                             {"GET"},
	"/metrics":                                     {"GET"},
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

	problem := doc.Components.Schemas["Problem"].Value
	types := problem.Properties["type"].Value.Enum
	for code := range contractProblems {
		if !slices.Contains(types, any("/problems/"+code)) {
			t.Errorf("Problem.type does not allow /problems/%s", code)
		}
	}

	// Each error response narrows the problem to its status and that status's types.
	byStatus := make(map[int][]string)
	for name, ref := range doc.Components.Responses {
		mt := ref.Value.Content.Get("application/problem+json")
		if mt == nil {
			continue
		}
		all := mt.Schema.Value.AllOf
		if len(all) != 2 || all[0].Ref != "#/components/schemas/Problem" {
			t.Errorf("response %s: schema is not allOf [Problem, narrowing]", name)
			continue
		}
		statuses := all[1].Value.Properties["status"].Value.Enum
		if len(statuses) != 1 {
			t.Errorf("response %s: %d statuses, want 1", name, len(statuses))
			continue
		}
		status := toInt(t, statuses[0])
		for _, typ := range all[1].Value.Properties["type"].Value.Enum {
			code := strings.TrimPrefix(typ.(string), "/problems/")
			if contractProblems[code] != status {
				t.Errorf("response %s (status %d) allows %s, whose status is %d", name, status, typ, contractProblems[code])
			}
			byStatus[status] = append(byStatus[status], code)
		}
	}
	for code, status := range contractProblems {
		if status == http.StatusMethodNotAllowed {
			continue // the router's answer to any route; no operation documents it
		}
		if !slices.Contains(byStatus[status], code) {
			t.Errorf("no error response with status %d allows /problems/%s", status, code)
		}
	}
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
			}
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			want := []int{400, 401, 500, 503}
			switch method {
			case "POST", "PUT", "DELETE":
				want = append(want, 409, 422)
			}
			if method == "POST" || method == "PUT" {
				want = append(want, 413, 415)
			}
			if path != "/v1/orders" {
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
			case method == "POST" && (key == nil || !key.Required):
				t.Errorf("%s: Idempotency-Key is not required", name)
			case (method == "PUT" || method == "DELETE") && (key == nil || key.Required):
				t.Errorf("%s: Idempotency-Key is not optional", name)
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
