package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acme/orders/api"
	"github.com/acme/orders/api/apitest"
)

// recorder is a testing.TB that records Errorf instead of failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

const (
	orderID = "01JD3Z8Q7T5V9W2X4Y6Z8A0B1C"
	order   = `{"id":"` + orderID + `","customerId":"c-1","currency":"EUR","status":"created",` +
		`"lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000}],"total":2000,"paid":0,"refunded":0,` +
		`"version":1,"createdAt":"2026-11-29T06:00:00Z","updatedAt":"2026-11-29T06:00:00Z"}`
	createBody = `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000}]}`
)

// respond returns a handler that answers every request with status, headers and body.
func respond(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(apitest.InvalidRequestHeader) != "" {
			http.Error(w, "the transport sent its own header", http.StatusTeapot)
			return
		}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func orderHeaders(extra ...string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "X-Request-Id": "r-1", "ETag": `"0"`}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

var problemHeaders = map[string]string{"Content-Type": "application/problem+json", "X-Request-Id": "r-1"}

func TestTransport(t *testing.T) {
	get := func(path string) func() *http.Request {
		return func() *http.Request {
			r, _ := http.NewRequest("GET", path, nil)
			return r
		}
	}
	create := func(body string, header ...string) func() *http.Request {
		return func() *http.Request {
			r, _ := http.NewRequest("POST", "/v1/orders", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}
	invalid := func(f func() *http.Request) func() *http.Request {
		return func() *http.Request { return apitest.ExpectInvalidRequest(f()) }
	}
	created := respond(201, orderHeaders("Location", "/v1/orders/"+orderID, "Log-Position", "7"), order)
	malformed := respond(400, problemHeaders, `{"type":"/problems/malformed-request","title":"Malformed request","status":400,"detail":"unknown field \"colour\""}`)
	notFound := respond(404, problemHeaders, `{"type":"/problems/not-found","title":"Not found","status":404,"detail":"no such order"}`)

	tests := []struct {
		name    string
		request func() *http.Request
		handler http.HandlerFunc
		want    []string // substrings of the reported errors, in order; none if empty
	}{
		{"conforming read", get("/v1/orders/" + orderID), respond(200, orderHeaders("Log-Position", "7"), order), nil},
		{"conforming create", create(createBody, "Idempotency-Key", "k-1"), created, nil},
		{"replayed create", create(createBody, "Idempotency-Key", "k-1"),
			respond(201, orderHeaders("Location", "/v1/orders/"+orderID, "Log-Position", "7", "Idempotent-Replayed", "true"), order), nil},
		{"conforming problem", get("/v1/orders/" + orderID), notFound, nil},
		{"conforming health", get("/healthz"), respond(200, orderHeaders(), `{"status":"ok"}`), nil},
		{"the document itself", get("/openapi.yaml"),
			respond(200, map[string]string{"Content-Type": "application/yaml", "X-Request-Id": "r"}, string(api.OpenAPI)), nil},
		{"conforming problem description", get("/problems/not-found"),
			respond(200, map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Request-Id": "r"}, "No such route or order."), nil},

		{"complete a refund without a body", func() *http.Request {
			r, _ := http.NewRequest("POST", "/v1/orders/"+orderID+"/refunds/rf-1/complete", nil)
			r.Header.Set("Idempotency-Key", "k-2")
			return r
		}, respond(200, orderHeaders("Log-Position", "9"), order), nil},
		{"change a line without a key", func() *http.Request {
			r, _ := http.NewRequest("PUT", "/v1/orders/"+orderID+"/lines/sku-1", strings.NewReader(`{"quantity":3}`))
			r.Header.Set("Content-Type", "application/json; charset=utf-8")
			r.Header.Set("If-Match", `"0"`)
			return r
		}, respond(200, orderHeaders("Log-Position", "9"), order), nil},

		{"wrong type in body", get("/v1/orders/" + orderID),
			respond(200, orderHeaders("Log-Position", "7"), strings.Replace(order, `"total":2000`, `"total":"2000"`, 1)),
			[]string{"response does not match"}},
		{"unknown field in body", get("/v1/orders/" + orderID),
			respond(200, orderHeaders("Log-Position", "7"), strings.Replace(order, `"paid":0`, `"paid":0,"colour":"red"`, 1)),
			[]string{"response does not match"}},
		{"unknown status", get("/v1/orders/" + orderID), respond(http.StatusTeapot, problemHeaders, `{}`),
			[]string{"status is not supported"}},
		{"missing required header", get("/v1/orders/" + orderID), respond(200, map[string]string{"Content-Type": "application/json", "X-Request-Id": "r"}, order),
			[]string{`"ETag" missing`}},
		{"wrong problem type for the status", get("/v1/orders/" + orderID),
			respond(404, problemHeaders, `{"type":"/problems/internal","title":"Not found","status":404,"detail":"no such order"}`),
			[]string{"response does not match"}},
		{"problem status not the response's", get("/v1/orders/" + orderID),
			respond(404, problemHeaders, `{"type":"/problems/not-found","title":"Not found","status":400,"detail":"no such order"}`),
			[]string{"response does not match"}},
		{"unquoted ETag", get("/v1/orders/" + orderID), respond(200, orderHeaders("ETag", "0", "Log-Position", "7"), order),
			[]string{`"ETag" doesn't match`}},
		{"time not RFC 3339", get("/v1/orders/" + orderID),
			respond(200, orderHeaders("Log-Position", "7"), strings.Replace(order, `"createdAt":"2026-11-29T06:00:00Z"`, `"createdAt":"yesterday"`, 1)),
			[]string{"/createdAt"}},
		{"missing Location", create(createBody, "Idempotency-Key", "k-1"),
			respond(201, orderHeaders("Log-Position", "7"), order), []string{`"Location" missing`}},

		{"missing Idempotency-Key", create(createBody), malformed,
			[]string{"request does not match"}},
		{"unknown field in request", create(`{"customerId":"c-1","currency":"EUR","colour":"red"}`, "Idempotency-Key", "k"), malformed,
			[]string{"request does not match"}},
		{"marked invalid request", invalid(create(`{"customerId":"c-1","currency":"EUR","colour":"red"}`)), malformed, nil},
		{"invalid request marked by header", create(`{"customerId":1}`, apitest.InvalidRequestHeader, "1"), malformed, nil},
		{"marked invalid request, bad response", invalid(create(`{"customerId":1}`)), respond(400, problemHeaders, `{"type":"/problems/malformed-request"}`),
			[]string{"response does not match"}},

		{"unknown route", get("/v2/orders"), notFound, []string{"not in api.OpenAPI"}},
		{"unknown method", func() *http.Request { r, _ := http.NewRequest("PATCH", "/v1/orders/"+orderID, nil); return r },
			respond(405, problemHeaders, `{"type":"/problems/method-not-allowed","title":"Method not allowed","status":405,"detail":"PATCH is not allowed"}`),
			[]string{"not in api.OpenAPI"}},
		{"marked unknown route", invalid(get("/v2/orders")), notFound, nil},
		{"marked unknown route, not a problem", invalid(get("/v2/orders")), respond(404, orderHeaders(), "not found"),
			[]string{"does not match"}},
		{"marked unknown route, wrong problem type", invalid(get("/v2/orders")),
			respond(404, problemHeaders, `{"type":"/problems/internal","title":"Internal error","status":404,"detail":"x"}`),
			[]string{"want /problems/not-found"}},
		{"marked unknown route, 200", invalid(get("/v2/orders")), respond(200, orderHeaders(), order),
			[]string{"want 404 or 405"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				sent <- string(b)
				tt.handler(w, r)
			}))
			defer srv.Close()

			rec := &recorder{TB: t}
			client := &http.Client{Transport: apitest.Transport(rec, nil)}
			req := tt.request()
			var body string
			if req.Body != nil {
				b, _ := req.GetBody()
				raw, _ := io.ReadAll(b)
				body = string(raw)
			}
			req.URL.Scheme, req.URL.Host = "http", srv.Listener.Addr().String()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}

			w := httptest.NewRecorder()
			tt.handler(w, httptest.NewRequest("GET", "/", nil))
			if string(got) != w.Body.String() {
				t.Errorf("the caller read %q, the server sent %q", got, w.Body.String())
			}
			if got := <-sent; got != body {
				t.Errorf("the server received %q, the caller sent %q", got, body)
			}

			errs := rec.errors()
			for _, e := range errs {
				t.Log(e)
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors reported, want %d:\n%s", len(errs), len(tt.want), strings.Join(errs, "\n"))
			}
			for i, want := range tt.want {
				if !strings.Contains(errs[i], want) {
					t.Errorf("error %d is\n%s\nwant it to mention %q", i, errs[i], want)
				}
			}
		})
	}
}

func TestTransportConcurrently(t *testing.T) {
	srv := httptest.NewServer(respond(201, orderHeaders("Location", "/v1/orders/"+orderID, "Log-Position", "7"), order))
	defer srv.Close()
	rec := &recorder{TB: t}
	client := &http.Client{Transport: apitest.Transport(rec, nil)}

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			body := createBody
			if i%2 == 1 {
				body = `{"customerId":"c-1"}` // missing currency
			}
			req, _ := http.NewRequest("POST", srv.URL+"/v1/orders", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "same")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != order {
				t.Errorf("body %q", b)
			}
		})
	}
	wg.Wait()
	if n := len(rec.errors()); n != 100 {
		t.Errorf("%d mismatches reported, want 100 (one per request without currency)", n)
	}
}
