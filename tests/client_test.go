package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/api/apitest"
)

// requestTimeout bounds every request; no test waits on the server longer than this.
const requestTimeout = 30 * time.Second

// request is one HTTP request to the server.
type request struct {
	method, path string
	key          string // Idempotency-Key; "" sends none (add the header to send it empty)
	// body is nil: no body; []byte or string: sent as is; an io.Reader: sent as is, chunked
	// (its length unknown); anything else: as JSON.
	body any
	// header holds name, value pairs set last: they override the defaults, and a pair with an
	// empty value sends the header empty.
	header []string
	// invalid marks a request sent invalid on purpose: apitest checks only its response.
	invalid bool
}

func (r request) String() string { return r.method + " " + r.path }

// response is what came back, read completely.
type response struct {
	req    string // "POST /v1/orders", for messages
	status int
	header http.Header
	body   []byte
	json   map[string]any // the body, when it is a JSON object (numbers as json.Number)
}

func (r *response) String() string {
	return fmt.Sprintf("%s → %d %s", r.req, r.status, tail(string(r.body), 2<<10))
}

// str is the body's string field name, "" if absent or not a string.
func (r *response) str(name string) string {
	s, _ := r.json[name].(string)
	return s
}

// num is the body's integer field name, -1 if absent or not an integer.
func (r *response) num(name string) int64 {
	return jsonInt(r.json[name])
}

func jsonInt(v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	i, err := n.Int64()
	if err != nil {
		return -1
	}
	return i
}

// replayed reports the Idempotent-Replayed header.
func (r *response) replayed() string { return r.header.Get("Idempotent-Replayed") }

// problem is the body's problem type, such as "/problems/not-found".
func (r *response) problem() string { return r.str("type") }

// client is the HTTP client for t: every request and response goes through apitest, which
// checks it against the OpenAPI document and reports mismatches on t.
func (s *server) client(t testing.TB) *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients == nil {
		s.clients = make(map[testing.TB]*http.Client)
	}
	c, ok := s.clients[t]
	if !ok {
		c = &http.Client{
			Transport: apitest.Transport(t, nil),
			// Location is checked, not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		s.clients[t] = c
	}
	return c
}

// timeout bounds each request to s: requestTimeout, unless the server was given more patience.
func (s *server) timeout() time.Duration {
	if s.patience > 0 {
		return s.patience
	}
	return requestTimeout
}

func (s *server) url(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base + path
}

// send makes the request; the error is a transport error (no response) or a bug in the test.
// It is safe to call from any goroutine.
func (s *server) send(t testing.TB, r request) (*response, error) {
	var body io.Reader
	contentType := ""
	switch b := r.body.(type) {
	case nil:
	case []byte:
		body, contentType = bytes.NewReader(b), "application/json"
	case string:
		body, contentType = strings.NewReader(b), "application/json"
	case io.Reader:
		// Wrapped so that http.NewRequest cannot learn the length of a *bytes.Reader or such.
		body, contentType = struct{ io.Reader }{b}, "application/json"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("%s: encode body: %w", r, err)
		}
		body, contentType = bytes.NewReader(j), "application/json"
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, s.url(r.path), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	if len(r.header)%2 != 0 {
		return nil, fmt.Errorf("%s: odd header list %q", r, r.header)
	}
	given := map[string]bool{} // a header given twice is sent twice; once, it replaces the default
	for i := 0; i < len(r.header); i += 2 {
		k := http.CanonicalHeaderKey(r.header[i])
		if !given[k] {
			req.Header[k] = nil
		}
		given[k] = true
		req.Header[k] = append(req.Header[k], r.header[i+1])
	}
	if r.invalid {
		req = apitest.ExpectInvalidRequest(req)
	}
	res, err := s.client(t).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read body: %w", r, err)
	}
	out := &response{req: r.String(), status: res.StatusCode, header: res.Header, body: raw}
	if len(raw) > 0 && raw[0] == '{' {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&out.json); err != nil {
			return nil, fmt.Errorf("%s: %d response is not JSON: %v: %s", r, res.StatusCode, err, raw)
		}
	}
	return out, nil
}

// do sends a valid request and fails t if no response came back.
func (s *server) do(t testing.TB, method, path, key string, body any, header ...string) *response {
	t.Helper()
	r, err := s.send(t, request{method: method, path: path, key: key, body: body, header: header})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// doInvalid sends a request that is invalid on purpose (apitest checks only the response).
func (s *server) doInvalid(t testing.TB, method, path, key string, body any, header ...string) *response {
	t.Helper()
	r, err := s.send(t, request{method: method, path: path, key: key, body: body, header: header, invalid: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sendSettled sends r until it is no longer answered 409 idempotency-key-in-flight, or until
// deadline. Each 409 must carry Retry-After. It returns the last response and how many 409s
// it met. Safe to call from any goroutine.
func (s *server) sendSettled(t testing.TB, r request, deadline time.Time) (*response, int, error) {
	inFlight := 0
	for {
		res, err := s.send(t, r)
		if err != nil {
			return nil, inFlight, err
		}
		if res.status != http.StatusConflict || res.problem() != "/problems/idempotency-key-in-flight" {
			return res, inFlight, nil
		}
		inFlight++
		if ra := res.header.Get("Retry-After"); ra == "" {
			return res, inFlight, fmt.Errorf("409 in-flight without Retry-After: %v", res)
		} else if _, err := strconv.Atoi(ra); err != nil {
			return res, inFlight, fmt.Errorf("409 in-flight with Retry-After %q, not seconds: %v", ra, res)
		}
		if time.Now().After(deadline) {
			return res, inFlight, fmt.Errorf("still in flight after %d attempts: %v", inFlight, res)
		}
		// The server itself waits up to --key-wait before answering 409; this pause only keeps
		// a server that answers at once from being hammered.
		time.Sleep(20 * time.Millisecond)
	}
}

// wantStatus fails t at once unless r has status code: what follows depends on it.
func wantStatus(t testing.TB, r *response, code int) {
	t.Helper()
	if r.status != code {
		t.Fatalf("%v; want status %d", r, code)
	}
}

// checkProblem reports on t unless r is an RFC 9457 problem of the given status and code.
func checkProblem(t testing.TB, r *response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%v; want a %d %s problem", r, status, code)
		return
	}
	checkProblemShape(t, r)
	if got, want := r.problem(), "/problems/"+code; got != want {
		t.Errorf("%v; want problem type %s", r, want)
	}
}

// checkProblemShape reports on t unless r is problem+json with type, title, status and detail.
func checkProblemShape(t testing.TB, r *response) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("%v: Content-Type %q, want application/problem+json", r, ct)
	}
	if r.json == nil {
		t.Errorf("%v: the problem is not a JSON object", r)
		return
	}
	if !strings.HasPrefix(r.problem(), "/problems/") {
		t.Errorf("%v: problem type %q is not /problems/<code>", r, r.problem())
	}
	if r.str("title") == "" {
		t.Errorf("%v: problem has no title", r)
	}
	if got := r.num("status"); got != int64(r.status) {
		t.Errorf("%v: problem status %d, want the response's %d", r, got, r.status)
	}
	if _, ok := r.json["detail"].(string); !ok {
		t.Errorf("%v: problem has no detail", r)
	}
}

// checkReplay reports on t unless again replays first: same status, the same body byte for
// byte, the same stored headers, and Idempotent-Replayed: true.
func checkReplay(t testing.TB, first, again *response) {
	t.Helper()
	if again.status != first.status {
		t.Errorf("replay: %v; want status %d", again, first.status)
	}
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("replay: body differs\nfirst: %s\nagain: %s", first.body, again.body)
	}
	for _, h := range []string{"Location", "ETag", "Log-Position", "Content-Type"} {
		if got, want := again.header.Get(h), first.header.Get(h); got != want {
			t.Errorf("replay: %s %q, want the first response's %q", h, got, want)
		}
	}
	if got := again.replayed(); got != "true" {
		t.Errorf("replay: Idempotent-Replayed %q, want \"true\"", got)
	}
}

// checkFirst reports on t if r, the first answer to its key, claims to be a replay.
func checkFirst(t testing.TB, r *response) {
	t.Helper()
	if h, ok := r.header["Idempotent-Replayed"]; ok {
		t.Errorf("%s: first response has Idempotent-Replayed %q; want no such header", r.req, h)
	}
}

// Bodies and flows used throughout. An order created from newOrder has one line: total 2000
// EUR, version 2 (created, line added).

type line struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
}

type newOrder struct {
	CustomerID      string `json:"customerId"`
	Currency        string `json:"currency"`
	Lines           []line `json:"lines,omitempty"`
	ClientReference string `json:"clientReference,omitempty"`
}

func orderFor(customer string) newOrder {
	return newOrder{CustomerID: customer, Currency: "EUR", Lines: []line{{SKU: "sku-1", Quantity: 2, UnitPrice: 1000}}}
}

const orderTotal = 2000

// create creates orderFor(customer) with key and returns the order id and the response.
func (s *server) create(t testing.TB, key, customer string, header ...string) (string, *response) {
	t.Helper()
	r := s.do(t, "POST", "/v1/orders", key, orderFor(customer), header...)
	return createdID(t, r), r
}

// createdID checks that r is a 201 for a new order and returns its id.
func createdID(t testing.TB, r *response) string {
	t.Helper()
	wantStatus(t, r, http.StatusCreated)
	id := r.str("id")
	if id == "" {
		t.Fatalf("%v: no order id", r)
	}
	if got, want := r.header.Get("Location"), "/v1/orders/"+id; got != want {
		t.Errorf("%v: Location %q, want %q", r, got, want)
	}
	return id
}

// command sends a POST command on order id and expects 200.
func (s *server) command(t testing.TB, id, sub, key string, body any, header ...string) *response {
	t.Helper()
	r := s.do(t, "POST", "/v1/orders/"+id+sub, key, body, header...)
	wantStatus(t, r, http.StatusOK)
	return r
}

// pay takes order id (total orderTotal) through payment paymentID to paid.
func (s *server) pay(t testing.TB, id, paymentID string) {
	t.Helper()
	s.command(t, id, "/payments", "start-"+paymentID, map[string]any{"paymentId": paymentID, "amount": orderTotal})
	s.command(t, id, "/payments/"+paymentID+"/confirm", "confirm-"+paymentID, map[string]any{"amount": orderTotal})
}

// order is GET /v1/orders/{id}, expecting 200.
func (s *server) order(t testing.TB, id string) *response {
	t.Helper()
	r := s.do(t, "GET", "/v1/orders/"+id, "", nil)
	wantStatus(t, r, http.StatusOK)
	return r
}

// event is one entry of GET /v1/orders/{id}/events.
type event struct {
	Revision json.Number    `json:"revision"`
	Position json.Number    `json:"position"`
	Type     string         `json:"type"`
	Data     map[string]any `json:"data"`
	Metadata map[string]any `json:"metadata"`
}

// events is the order's stream, oldest first.
func (s *server) events(t testing.TB, id string) []event {
	t.Helper()
	r := s.do(t, "GET", "/v1/orders/"+id+"/events", "", nil)
	wantStatus(t, r, http.StatusOK)
	var body struct {
		Events []event `json:"events"`
	}
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	for i, e := range body.Events {
		if e.Revision.String() != strconv.Itoa(i) {
			t.Errorf("%v: event %d has revision %s", r, i, e.Revision)
		}
	}
	return body.Events
}

// count is how many events have type typ and, if field is not "", data[field] == value.
func count(events []event, typ, field, value string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ && (field == "" || e.Data[field] == value) {
			n++
		}
	}
	return n
}

// types lists the events' types, for messages.
func types(events []event) []string {
	var ts []string
	for _, e := range events {
		ts = append(ts, e.Type)
	}
	return ts
}

// etag is the ETag of an order at version v: "v" and the version, quoted.
func etag(version int64) string { return strconv.Quote("v" + strconv.FormatInt(version, 10)) }
