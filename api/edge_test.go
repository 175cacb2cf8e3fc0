package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/internal/syncbuf"
	"github.com/labstack/echo/v4"
	dto "github.com/prometheus/client_model/go"
)

// value is the value of the series of m's registry named name with the given label values
// (name, value pairs), 0 if there is none.
func value(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(s.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue series
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return s.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func serve(h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A client's X-Request-Id is taken only if it is 1 to 128 printable ASCII characters: it goes
// into every event and log line of the request.
func TestRequestIDsAreBounded(t *testing.T) {
	h := (&Server{Log: slog.New(slog.DiscardHandler)}).Handler()
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"r-1", true},
		{"a", true},
		{strings.Repeat("r", 128), true},
		{"with space ~!", true},
		{strings.Repeat("r", 129), false},
		{strings.Repeat("r", 64<<10), false},
		{"é", false},
		{"a\tb", false},
		{"a\x7fb", false},
		{"", false},
	} {
		got := serve(h, "GET", "/healthz", "X-Request-Id", tc.sent).Header().Get("X-Request-Id")
		if kept := got == tc.sent; kept != tc.kept {
			t.Errorf("X-Request-Id %.40q: answered with %.40q; want it kept: %v", tc.sent, got, tc.kept)
		}
		if !validRequestID(got) {
			t.Errorf("X-Request-Id %.40q: answered with %q, not 1 to 128 printable ASCII characters", tc.sent, got)
		}
	}
}

// Methods a client makes up and paths that match no route fold into one label value each, so
// the series of the request metric are bounded whatever clients send.
func TestRequestMetricLabelsAreBounded(t *testing.T) {
	s := &Server{Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics()}
	h := s.Handler()
	for i := range 200 {
		serve(h, fmt.Sprintf("MADEUP%d", i), "/healthz")
		serve(h, "GET", fmt.Sprintf("/nowhere/%d", i))
		serve(h, fmt.Sprintf("X%d", i), fmt.Sprintf("/v1/orders/%d/elsewhere", i))
	}
	serve(h, "GET", "/healthz")
	serve(h, "HEAD", "/healthz")
	serve(h, "OPTIONS", "/healthz")

	patterns := []string{"unmatched"}
	for _, r := range h.(*echo.Echo).Routes() {
		patterns = append(patterns, r.Path)
	}
	families, err := s.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range families {
		if f.GetName() != "orders_http_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				switch v := l.GetValue(); l.GetName() {
				case "method":
					if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"}, v) {
						t.Errorf("method label %q", v)
					}
				case "route":
					if !slices.Contains(patterns, v) {
						t.Errorf("route label %q is not a route pattern", v)
					}
				}
			}
		}
	}
	if series == 0 || series > 10 {
		t.Errorf("%d series of orders_http_request_duration_seconds after 600 requests of made-up methods and paths; want a handful", series)
	}
	for _, tc := range []struct {
		method, route, status string
		want                  float64
	}{
		{"other", "/healthz", "405", 200},
		{"GET", "unmatched", "404", 200},
		{"other", "unmatched", "404", 200},
		{"HEAD", "/healthz", "200", 1},
	} {
		if got := value(t, s.Metrics, "orders_http_request_duration_seconds", "method", tc.method, "route", tc.route, "status", tc.status); got != tc.want {
			t.Errorf("requests{method=%q,route=%q,status=%q} = %v, want %v", tc.method, tc.route, tc.status, got, tc.want)
		}
	}
}

// orderAppendsFail is a store that appends to one stream at a time and cannot append to an
// order's stream: a key is claimed, its command fails, and the answer is the command's 503
// outcome, written by Server.write.
type orderAppendsFail struct{ eventstore.Store }

// SetMaxAge keeps no age: these tests do not reach a key's expiry.
func (f orderAppendsFail) SetMaxAge(context.Context, string, time.Duration) error { return nil }

func (f orderAppendsFail) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if strings.HasPrefix(stream, "order-") {
		return eventstore.AppendResult{}, fmt.Errorf("%w: no space left on device", eventstore.ErrUnavailable)
	}
	return f.Store.Append(ctx, stream, expected, events...)
}

// logLines are the JSON log lines of logs with msg.
func logLines(t *testing.T, logs *syncbuf.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.SplitSeq(logs.String(), "\n") {
		var m map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// Every 5xx answer carries Retry-After, whoever writes it, and its cause is logged: at most
// a line a second per problem, the next line saying how many were held back.
func TestServerErrorsCarryRetryAfterAndALimitedLogLine(t *testing.T) {
	srv, _ := newServer(t, func(s eventstore.Store) eventstore.Store { return orderAppendsFail{s} })
	var logs syncbuf.Buffer
	srv.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	srv.Ready = func(context.Context) error { return errors.New("projection orders failed: disk I/O error") }
	h := srv.Handler()
	now := time.Unix(1_000_000, 0)
	srv.failures.now = func() time.Time { return now }
	h.(*echo.Echo).GET("/boom", func(echo.Context) error { return errors.New("boom") })
	create := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"customerId":"c-1","currency":"EUR"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	for i := range 50 {
		if r := create(fmt.Sprintf("k-%d", i)); r.Code != http.StatusServiceUnavailable || r.Header().Get("Retry-After") != "1" {
			t.Fatalf("a create on a full disk: %d %v %s; want 503 with Retry-After: 1", r.Code, r.Header(), r.Body)
		}
	}
	for _, path := range []string{"/boom", "/readyz"} {
		if r := serve(h, "GET", path); r.Code < 500 || r.Header().Get("Retry-After") != "1" {
			t.Errorf("GET %s: %d %v; want a 5xx with Retry-After: 1", path, r.Code, r.Header())
		}
	}
	lines := logLines(t, &logs, "server error")
	if len(lines) != 2 {
		t.Fatalf("after 51 answers of 503 and one of 500 in a second: %d log lines %v; want one per problem", len(lines), lines)
	}
	if l := lines[0]; l["problem"] != "unavailable" || !strings.Contains(l["cause"].(string), "no space left on device") ||
		l["route"] != "/v1/orders" || l["request_id"] == "" || l["held_back"] != 0.0 {
		t.Errorf("the 503's line: %v; want the cause, the route and the request id", l)
	}
	if l := lines[1]; l["problem"] != "internal" || l["cause"] != "boom" {
		t.Errorf("the 500's line: %v; want the cause boom", l)
	}

	now = now.Add(time.Second)
	create("k-after")
	lines = logLines(t, &logs, "server error")
	if len(lines) != 3 || lines[2]["held_back"] != 50.0 {
		t.Fatalf("a second later: lines %v; want a third, saying 50 were held back", lines)
	}
}

// HEAD is routed wherever GET is, with the same access rule.
func TestHeadIsRoutedWhereGetIs(t *testing.T) {
	e := (&Server{Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics()}).Handler().(*echo.Echo)
	heads := map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method == http.MethodHead {
			heads[r.Path] = true
		}
	}
	n := 0
	for _, r := range e.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		n++
		if !heads[r.Path] {
			t.Errorf("GET %s has no HEAD", r.Path)
		}
		get, okGet := ruleFor(http.MethodGet, r.Path)
		head, okHead := ruleFor(http.MethodHead, r.Path)
		if get != head || okGet != okHead {
			t.Errorf("%s: HEAD's rule %+v, GET's %+v", r.Path, head, get)
		}
	}
	if n < 10 {
		t.Errorf("only %d GET routes", n)
	}
	if r := serve(e, "HEAD", "/healthz"); r.Code != http.StatusOK || r.Header().Get("Content-Type") != "application/json" {
		t.Errorf("HEAD /healthz: %d %v", r.Code, r.Header())
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"", "", false},
	} {
		token, ok := bearerToken(tc.header)
		if ok != tc.ok || (ok && token != tc.token) {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
	s := &Server{Log: slog.New(slog.DiscardHandler), APIKeys: APIKeys{{Principal: "shop-1", Hash: HashKey("s3cret"), Roles: access.RoleClient}}}
	h := s.Handler()
	r := serve(h, "GET", "/v1/orders/x", "Authorization", "Bearer wrong")
	if r.Code != http.StatusUnauthorized || r.Header().Get("WWW-Authenticate") != `Bearer realm="orders"` {
		t.Errorf("an unknown key: %d %v; want 401 with WWW-Authenticate", r.Code, r.Header())
	}
}

// The listener answers a connection over its limit 503 with Retry-After and closes it, counts
// it, and serves again once a connection closes.
func TestListenerRefusesConnectionsOverItsLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	var logs syncbuf.Buffer
	l := NewListener(ln, 2, m, slog.New(slog.NewJSONHandler(&logs, nil)))
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		MaxHeaderBytes: MaxHeaderBytes}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })

	get := func(c net.Conn) *http.Response {
		t.Helper()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(res.Body)
		return res
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	idle := []net.Conn{dial(), dial()}
	for _, c := range idle {
		if res := get(c); res.StatusCode != http.StatusOK {
			t.Fatalf("under the limit: %s", res.Status)
		}
	}
	over := get(dial())
	if over.StatusCode != http.StatusServiceUnavailable || over.Header.Get("Retry-After") != "1" ||
		over.Header.Get("Content-Type") != "application/problem+json" || !validRequestID(over.Header.Get("X-Request-Id")) {
		t.Fatalf("over the limit: %s %v; want 503 problem with Retry-After and X-Request-Id", over.Status, over.Header)
	}
	if got := value(t, m, "orders_http_connections_refused_total"); got != 1 {
		t.Errorf("refused %v; want 1", got)
	}
	if got := value(t, m, "orders_http_connections_open"); got != 2 {
		t.Errorf("open %v; want 2", got)
	}
	if lines := logLines(t, &logs, "connection refused"); len(lines) != 1 {
		t.Errorf("log lines of the refusal: %v", lines)
	}

	idle[0].Close()
	for deadline := time.Now().Add(10 * time.Second); value(t, m, "orders_http_connections_open") > 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection still counts as open after 10 s")
		}
	}
	if res := get(dial()); res.StatusCode != http.StatusOK {
		t.Fatalf("once a connection closed: %s; want it served", res.Status)
	}
}

// net/http answers headers over MaxHeaderBytes itself, before any handler: the listener's
// connections make that answer the API's problem.
func TestHeadersTooLargeIsAProblem(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), MaxHeaderBytes: MaxHeaderBytes}
	go hs.Serve(NewListener(ln, 10, nil, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { hs.Close() })
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("b", 100<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p Problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge ||
		res.Header.Get("Content-Type") != "application/problem+json" || p.Type != "/problems/headers-too-large" || p.Status != 431 {
		t.Fatalf("a 100 KiB header: %s %v %+v (%v); want the 431 problem headers-too-large", res.Status, res.Header, p, err)
	}
}

// A request that another front end (the console) authenticated itself is logged with the
// principal it noted, as the API's own requests are.
func TestRequestLogNamesTheCallerAFrontEndNoted(t *testing.T) {
	var logs syncbuf.Buffer
	s := &Server{Log: slog.New(slog.NewJSONHandler(&logs, nil)), APIKeys: APIKeys{{Principal: "shop-1", Hash: HashKey("s3cret"), Roles: access.RoleClient}}}
	s.Console = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		NoteCaller(r, access.Caller{Principal: "auditor-7", Roles: access.RoleAuditor})
		w.WriteHeader(http.StatusNoContent)
	})
	if r := serve(s.Handler(), "GET", "/console/orders"); r.Code != http.StatusNoContent {
		t.Fatalf("console page: %d; want 204", r.Code)
	}
	lines := logLines(t, &logs, "request")
	if len(lines) != 1 || lines[0]["route"] != "/console/*" || lines[0]["principal"] != "auditor-7" {
		t.Errorf("request log lines %v; want one for the console route with principal auditor-7", lines)
	}
}
