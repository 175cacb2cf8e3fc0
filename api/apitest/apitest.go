// Package apitest checks the HTTP traffic of black-box tests against the API's OpenAPI
// document, api.OpenAPI.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/acme/orders/api"
)

// InvalidRequestHeader, set to any value on a request, does what ExpectInvalidRequest does.
// The transport removes it before sending the request.
const InvalidRequestHeader = "X-Test-Invalid-Request"

type expectInvalidKey struct{}

// ExpectInvalidRequest returns r marked as deliberately not matching the document: a body
// with a wrong type or unknown field, a missing or malformed Idempotency-Key, a body over the
// size limit, an unknown route… The transport then does not check the request, but still
// checks the response: for a route the document has, against that route's responses; for
// a route it does not have, as a 404 or 405 problem.
func ExpectInvalidRequest(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), expectInvalidKey{}, true))
}

// Transport returns an http.RoundTripper that sends requests through next (nil means
// http.DefaultTransport) and checks every request and every response against api.OpenAPI,
// reporting each mismatch with tb.Errorf (it never fails the request itself).
//
// A request to a path or method that the document does not have is a mismatch, unless it is
// marked with ExpectInvalidRequest or InvalidRequestHeader. Response bodies are read in full
// to be checked and handed to the caller unread. The transport is safe for concurrent use.
func Transport(tb testing.TB, next http.RoundTripper) http.RoundTripper {
	tb.Helper()
	s, err := loadSpec()
	if err != nil {
		tb.Fatalf("apitest: %v", err)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{tb: tb, next: next, spec: s}
}

type spec struct {
	router  routers.Router
	problem *openapi3.Schema
}

// loadSpec parses api.OpenAPI once for every transport: the result is only read afterwards.
var loadSpec = sync.OnceValues(func() (*spec, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load api.OpenAPI: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api.OpenAPI is invalid: %w", err)
	}
	// Routes are matched on the path alone: tests serve on any host and port.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api.OpenAPI: %w", err)
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil || problem.Value == nil {
		return nil, errors.New("api.OpenAPI has no Problem schema")
	}
	return &spec{router: router, problem: problem.Value}, nil
})

type transport struct {
	tb   testing.TB
	next http.RoundTripper
	spec *spec
}

var options = func() *openapi3filter.Options {
	o := &openapi3filter.Options{
		// The server authenticates; the document only says how.
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	o.WithCustomSchemaErrorFunc(schemaError)
	return o
}()

// schemaError describes err in one line: the default message adds the whole schema and
// value, which buries the point when many requests fail.
func schemaError(err *openapi3.SchemaError) string {
	if err.Origin != nil {
		return "" // the default: the path and the origin's message, no dump
	}
	reason := err.Reason
	if reason == "" {
		reason = fmt.Sprintf("does not match %q", err.SchemaField)
	}
	if p := err.JSONPointer(); len(p) > 0 {
		return fmt.Sprintf("at %q: %s", "/"+strings.Join(p, "/"), reason)
	}
	return reason
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	invalid := req.Context().Value(expectInvalidKey{}) != nil || req.Header.Get(InvalidRequestHeader) != ""
	name := req.Method + " " + req.URL.RequestURI()

	body, err := drain(req.Body)
	if err != nil {
		return nil, fmt.Errorf("apitest: read request body: %w", err)
	}
	out := withBody(req, body)
	out.Header.Del(InvalidRequestHeader)

	// The validator reads its own copy, so that nothing it does reaches the server.
	in := withBody(out, body)
	route, params, routeErr := t.spec.router.FindRoute(in)
	switch {
	case routeErr != nil && !invalid:
		t.tb.Errorf("apitest: %s: not in api.OpenAPI: %v", name, routeErr)
	case routeErr == nil && !invalid:
		err := openapi3filter.ValidateRequest(in.Context(), &openapi3filter.RequestValidationInput{
			Request: in, PathParams: params, Route: route, Options: options,
		})
		if err != nil {
			t.tb.Errorf("apitest: %s: request does not match api.OpenAPI: %v", name, err)
		}
	}

	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	data, err := drain(resp.Body)
	if err != nil {
		// The caller meets the error where it would have: reading the body. There is
		// nothing complete to check.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{err}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))

	var mismatch error
	if routeErr != nil {
		mismatch = t.checkUnrouted(resp, data)
	} else {
		mismatch = checkResponse(in, route, params, resp, data)
	}
	if mismatch != nil {
		t.tb.Errorf("apitest: %s: %d response does not match api.OpenAPI: %v\nbody: %s",
			name, resp.StatusCode, mismatch, truncate(data))
	}
	return resp, nil
}

// checkResponse checks a response to the routed request in against the document.
func checkResponse(in *http.Request, route *routers.Route, params map[string]string, resp *http.Response, data []byte) error {
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: in, PathParams: params, Route: route, Options: options,
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Options: options,
	}
	input.SetBodyBytes(data)
	return errors.Join(openapi3filter.ValidateResponse(in.Context(), input), checkProblem(route, resp.StatusCode, data))
}

// checkProblem checks what the Problem schema leaves open, so that clients accept codes added
// later: a problem's status is the response's, and its type one of the codes that the response
// lists in x-problem-codes.
func checkProblem(route *routers.Route, status int, data []byte) error {
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return nil // an undocumented status: ValidateResponse reports it
	}
	codes, ok := ref.Value.Extensions["x-problem-codes"].([]any)
	if !ok {
		return nil // not a problem response
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if json.Unmarshal(data, &p) != nil {
		return nil // no body (HEAD), or not JSON: ValidateResponse reports it
	}
	if p.Status != status {
		return fmt.Errorf("problem status %d, response status %d", p.Status, status)
	}
	if !slices.Contains(codes, any(strings.TrimPrefix(p.Type, "/problems/"))) {
		return fmt.Errorf("problem type %s is not one of the %d response's x-problem-codes %v", p.Type, status, codes)
	}
	return nil
}

// checkUnrouted checks the response to a request for a route the document does not have:
// a 404 or 405 problem.
func (t *transport) checkUnrouted(resp *http.Response, data []byte) error {
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("status %d for a route api.OpenAPI does not have, want 404 or 405", resp.StatusCode)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		return errors.New(`response header "X-Request-Id" missing`)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/problem+json" {
		return fmt.Errorf("content type %q, want application/problem+json", mt)
	}
	var p any
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("problem body: %w", err)
	}
	if err := t.spec.problem.VisitJSON(p, openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(schemaError)); err != nil {
		return fmt.Errorf("problem body does not match the Problem schema: %w", err)
	}
	fields := p.(map[string]any)
	if status := fields["status"]; status != float64(resp.StatusCode) {
		return fmt.Errorf("problem status %v, response status %d", status, resp.StatusCode)
	}
	want := "/problems/not-found"
	if resp.StatusCode == http.StatusMethodNotAllowed {
		want = "/problems/method-not-allowed"
	}
	if fields["type"] != want {
		return fmt.Errorf("problem type %v, want %s", fields["type"], want)
	}
	return nil
}

// drain reads and closes rc, which may be nil.
func drain(rc io.ReadCloser) ([]byte, error) {
	if rc == nil || rc == http.NoBody {
		return nil, nil
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// withBody returns a copy of r that reads body. A body of unknown length stays unknown, so
// that it is sent chunked as the caller meant.
func withBody(r *http.Request, body []byte) *http.Request {
	c := r.Clone(r.Context())
	if body == nil {
		c.Body, c.GetBody = nil, nil
		return c
	}
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if r.ContentLength > 0 {
		c.ContentLength = int64(len(body))
	}
	return c
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func truncate(b []byte) []byte {
	const max = 2 << 10
	if len(b) > max {
		return append(b[:max:max], "…"...)
	}
	return b
}
