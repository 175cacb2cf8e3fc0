package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/api/apitest"
	"github.com/acme/orders/tests/load"
)

// Random methods, paths, headers and bodies, valid and not, sent to the real binary: it never
// panics and never answers 5xx but the documented 503 of a server short of time (a read model
// or a readiness check that could not answer within its bound, a full budget of bodies: under
// the soak's other tests on two cores, answers take seconds), and every answer matches the
// OpenAPI document (apitest checks the answers to routes it has, and that others are 404 or 405
// problems). The seed is logged; ORDERS_GARBAGE_SEED repeats a run.
func TestHTTPGarbage(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "garbage-setup", "c-garbage")
	s.command(t, id, "/payments", "garbage-pay", map[string]any{"paymentId": "pay-g", "amount": orderTotal})

	seed := rand.Uint64()
	if v := os.Getenv("ORDERS_GARBAGE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("ORDERS_GARBAGE_SEED=%q: %v", v, err)
		}
	}
	n := soakSize(300, 3000)
	t.Logf("%d requests, seed %d (ORDERS_GARBAGE_SEED=%d repeats them)", n, seed, seed)

	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	raw := &http.Transport{MaxIdleConnsPerHost: 8}
	// Requests for a route and method of the document go through apitest, which checks the
	// answer against it; the others are checked here: no 5xx, and errors as problems.
	checked := &http.Client{Transport: apitest.Transport(t, raw), CheckRedirect: noRedirect}
	plain := &http.Client{Transport: raw, CheckRedirect: noRedirect}
	g := &garbage{id: id}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		failures int
	)
	deadline := time.Now().Add(2 * time.Minute)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				method, path, header, body := g.request(rng)
				u := garbageURL(s.url(""), path)
				client := plain
				// A body on a GET or DELETE is not a request of the document: they take none.
				if documented(method, u.RequestURI()) && (body == nil || method == http.MethodPost || method == http.MethodPut) {
					client = checked
				}
				status, err := sendGarbage(client, u, method, header, body)
				mu.Lock()
				statuses[status]++
				if err != nil || status >= 500 && status != http.StatusServiceUnavailable {
					if failures++; failures <= 10 {
						t.Errorf("request %d: %s %s %v body %s: %d %v", i, method, path, header, clip(body), status, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if time.Now().After(deadline) {
			t.Logf("stopped after %d requests: out of time", i)
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("statuses: %v", statuses)
	if failures > 0 {
		t.Errorf("%d requests failed or answered 5xx", failures)
	}

	// Requests that no well-behaved client library sends, on raw connections.
	for _, tc := range rawGarbage(id) {
		status, answer, err := sendRaw(s.url(""), tc.raw, tc.halfClose)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case status >= 500:
			t.Errorf("%s: answered %s", tc.name, clip([]byte(answer)))
		}
	}

	// Still serving, and nothing panicked or changed the order.
	if r := s.do(t, "GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("healthz after the garbage: %v", r)
	}
	if log := s.current().stderr.String(); load.Panicked([]byte(log)) {
		t.Errorf("the server logged a panic:\n%s", tail(log, 8<<10))
	}
}

// garbage makes random requests around the routes of the API.
type garbage struct {
	id string // an order that exists
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func (g *garbage) request(rng *rand.Rand) (method, path string, header http.Header, body []byte) {
	if rng.IntN(2) == 0 {
		// A well-formed command to a real order or route, with a random body: these reach
		// the decoders and the domain.
		header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {fmt.Sprintf("g-%d", rng.Uint32())}}
		method, path = "POST", pick(rng, "/v1/orders", "/v1/orders/"+g.id+"/lines", "/v1/orders/"+g.id+"/payments",
			"/v1/orders/"+g.id+"/payments/pay-g/confirm", "/v1/orders/"+g.id+"/payments/pay-g/fail", "/v1/orders/"+g.id+"/cancel",
			"/v1/orders/"+g.id+"/shipments", "/v1/orders/"+g.id+"/refunds", "/v1/orders/"+g.id+"/refunds/r-1/complete")
		if rng.IntN(4) == 0 {
			method, path = "PUT", "/v1/orders/"+g.id+"/lines/sku-1"
		}
		return method, path, header, g.body(rng)
	}
	method = pick(rng, "GET", "POST", "POST", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECTX")
	// Control characters in headers are for the raw requests: the client refuses them.
	path = g.path(rng)
	header = http.Header{}
	if rng.IntN(4) > 0 {
		header.Set("Content-Type", pick(rng, "application/json", "application/json", "application/json; charset=utf-8",
			"application/merge-patch+json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
			"", "json", "application/json; charset=", ";;;", "application/json\t"))
	}
	if rng.IntN(5) > 0 {
		header.Set("Idempotency-Key", pick(rng, fmt.Sprintf("g-%d", rng.IntN(50)), "garbage-pay", "garbage-setup", "",
			strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("é", 10), " ", "~!@#$%^&*()"))
	}
	if rng.IntN(4) == 0 {
		header.Set("If-Match", pick(rng, `"0"`, `"1"`, `"2"`, `W/"1"`, "*", "garbage", `"-1"`, `"18446744073709551616"`, `""`, `"1", "2"`))
	}
	if rng.IntN(4) == 0 {
		header.Set("Authorization", pick(rng, "Bearer ", "Bearer x", "Basic Zm9vOmJhcg==", "garbage", strings.Repeat("B", 4000)))
	}
	if rng.IntN(4) == 0 {
		header.Set("X-Request-Id", pick(rng, "", "r-1", strings.Repeat("r", 5000), "é", "../../etc"))
	}
	if rng.IntN(8) == 0 {
		header.Set("Accept", pick(rng, "application/xml", "*/*", "text/html;q=0", ""))
	}
	if rng.IntN(3) > 0 {
		body = g.body(rng)
	}
	return method, path, header, body
}

func (g *garbage) path(rng *rand.Rand) string {
	id := pick(rng, g.id, g.id, g.id, "01ARZ3NDEKTSV4RRFFQ69G5FAV", "x", "..", "%2e%2e", "%00", "%2F", "%", "%zz",
		strings.Repeat("A", 5000), "01arz3ndektsv4rrffq69g5fav", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ", "é", " ", "")
	seg := func() string {
		return pick(rng, "sku-1", "pay-g", "r-1", "", "%00", "..", "a%2Fb", strings.Repeat("s", 300), "é", "%ff")
	}
	p := pick(rng,
		"/v1/orders", "/v1/orders/", "/v1/orders/"+id, "/v1/orders/"+id+"/events", "/v1/orders/"+id+"/lines",
		"/v1/orders/"+id+"/lines/"+seg(), "/v1/orders/"+id+"/payments", "/v1/orders/"+id+"/payments/"+seg()+"/confirm",
		"/v1/orders/"+id+"/payments/"+seg()+"/fail", "/v1/orders/"+id+"/cancel", "/v1/orders/"+id+"/shipments",
		"/v1/orders/"+id+"/refunds", "/v1/orders/"+id+"/refunds/"+seg()+"/complete",
		"/healthz", "/readyz", "/openapi.yaml", "/problems/"+seg(), "/problems/not-found", "/", "/v1", "/v2/orders",
		"//v1//orders", "/v1/orders/"+id+"/events/extra", "/V1/ORDERS", "/v1/orders/"+id+"/")
	if rng.IntN(5) == 0 {
		p += "?" + pick(rng, "status=paid", "status=garbage", "limit=-1", "limit=0", "limit=99999999999999999999", "cursor=garbage",
			"customer=c-garbage&limit=2", "wait=1", "after=x", "a=%zz", "&&&", "limit=1&limit=2")
	}
	return p
}

func (g *garbage) body(rng *rand.Rand) []byte {
	valid := pick(rng,
		`{"customerId":"c-1","currency":"EUR","lines":[{"sku":"s","quantity":1,"unitPrice":100}],"clientReference":"r"}`,
		`{"sku":"sku-9","quantity":2,"unitPrice":300}`, `{"quantity":3}`, `{"paymentId":"pay-g","amount":2000}`,
		`{"amount":2000}`, `{"reason":"r"}`, `{"carrier":"dhl","trackingNumber":"t"}`, `{"refundId":"r-1","amount":1}`, `{}`)
	switch rng.IntN(12) {
	case 0: // random bytes
		b := make([]byte, rng.IntN(2000))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	case 1: // truncated
		return []byte(valid[:rng.IntN(len(valid)+1)])
	case 2: // a byte changed
		b := []byte(valid)
		b[rng.IntN(len(b))] = byte(rng.IntN(256))
		return b
	case 3: // wrong types and extreme values
		return []byte(pick(rng, `{"customerId":1,"currency":["EUR"]}`, `{"quantity":1e400}`, `{"quantity":-0}`,
			`{"amount":9223372036854775808}`, `{"amount":-9223372036854775809}`, `{"quantity":1.5}`, `{"amount":"2000"}`,
			`{"sku":null,"quantity":null,"unitPrice":null}`, `{"reason":true}`, `null`, `[]`, `"x"`, `0`, `{"a":1}`,
			`{"customerId":"c","currency":"EUR","currency":"USD"}`, `{"customerId":"\u0000","currency":"EUR"}`,
			`{"customerId":"c","currency":"eur"}`, `{"customerId":"c","currency":"XXX"}`,
			`{"customerId":"`+strings.Repeat("c", 200)+`","currency":"EUR"}`, `{"sku":"s","quantity":10001,"unitPrice":1}`,
			`{"sku":"s","quantity":1,"unitPrice":1000000000001}`, `{"amount":0}`, `{"amount":-1}`))
	case 4: // deep
		d := 1 + rng.IntN(20000)
		return []byte(`{"customerId":"c","currency":"EUR","lines":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`)
	case 5: // large: near, at and over the 1 MiB limit
		size := pick(rng, 1<<20-100, 1<<20, 1<<20+1, 3<<20)
		pad := size - len(`{"reason":""}`)
		return []byte(`{"reason":"` + strings.Repeat("x", pad) + `"}`)
	case 6: // invalid UTF-8, BOM, NUL
		return []byte(pick(rng, "{\"reason\":\"\xff\xfe\"}", "\xef\xbb\xbf"+valid, valid+"\x00", "{\"reason\":\"a\x00b\"}"))
	case 7: // trailing data
		return []byte(valid + pick(rng, " ", "\n", "}", "]", "{}", " x", ",", "\x00"))
	}
	return []byte(valid)
}

// garbageURL is the URL of a random path; one that does not parse is sent escaped.
func garbageURL(base, path string) *url.URL {
	u, err := url.Parse(base + path)
	if err != nil {
		u, _ = url.Parse(base + "/" + url.PathEscape(path))
	}
	return u
}

// sendGarbage sends a request built from random parts and reads the whole answer. It fails
// for an error that is not a problem, and for a 503 that is not the unavailable problem with
// a Retry-After.
func sendGarbage(client *http.Client, u *url.URL, method string, header http.Header, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build: %w", err)
	}
	if body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	req.Header = header
	req.Header.Set(apitest.InvalidRequestHeader, "garbage")
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode >= 400 && method != http.MethodHead {
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		ct := res.Header.Get("Content-Type")
		if err := json.Unmarshal(data, &p); err != nil || ct != "application/problem+json" ||
			!strings.HasPrefix(p.Type, "/problems/") || p.Status != res.StatusCode {
			return res.StatusCode, fmt.Errorf("not a problem: %s %s", ct, clip(data))
		}
		if res.StatusCode == http.StatusServiceUnavailable && (p.Type != "/problems/unavailable" || res.Header.Get("Retry-After") == "") {
			return res.StatusCode, fmt.Errorf("a 503 that is not unavailable with a Retry-After: %s %s", res.Header, clip(data))
		}
	}
	return res.StatusCode, nil
}

// documentedRoutes are the routes of the document, as patterns of their paths.
var documentedRoutes = map[string]*regexp.Regexp{}

func init() {
	seg := `[^/?]+`
	for method, paths := range map[string][]string{
		"GET": {"/v1/orders/" + seg, "/v1/orders/" + seg + "/events", "/healthz", "/readyz", "/openapi.yaml", "/problems/" + seg},
		"POST": {"/v1/orders", "/v1/orders/" + seg + "/lines", "/v1/orders/" + seg + "/payments",
			"/v1/orders/" + seg + "/payments/" + seg + "/(confirm|fail)", "/v1/orders/" + seg + "/cancel",
			"/v1/orders/" + seg + "/shipments", "/v1/orders/" + seg + "/refunds", "/v1/orders/" + seg + "/refunds/" + seg + "/complete"},
		"PUT":    {"/v1/orders/" + seg + "/lines/" + seg},
		"DELETE": {"/v1/orders/" + seg + "/lines/" + seg},
	} {
		documentedRoutes[method] = regexp.MustCompile(`^(` + strings.Join(paths, "|") + `)(\?.*)?$`)
	}
}

// documented reports whether the document has the route and method of a request.
func documented(method, path string) bool {
	re, ok := documentedRoutes[method]
	return ok && re.MatchString(path)
}

// rawCase is a request written byte for byte on its own connection.
type rawCase struct {
	name      string
	raw       string
	halfClose bool // close the sending side after writing: the server meets EOF mid-request
}

func rawGarbage(id string) []rawCase {
	post := func(path, headers, body string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nIdempotency-Key: raw-" +
			strconv.Itoa(len(headers)+len(body)) + "\r\n" + headers + "\r\n" + body
	}
	const create = `{"customerId":"c-raw","currency":"EUR"}`
	return []rawCase{
		{name: "truncated body", raw: post("/v1/orders", "Content-Length: 100\r\n", create[:20]), halfClose: true},
		{name: "truncated chunked body", raw: post("/v1/orders/"+id+"/cancel", "Transfer-Encoding: chunked\r\n", "10\r\n{\"reason\":"), halfClose: true},
		{name: "body longer than Content-Length", raw: post("/v1/orders", "Content-Length: 10\r\n", create)},
		{name: "bad chunk size", raw: post("/v1/orders", "Transfer-Encoding: chunked\r\n", "zz\r\n"+create+"\r\n0\r\n\r\n")},
		{name: "Content-Length and chunked", raw: post("/v1/orders", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "5\r\n{\"a\":\r\n0\r\n\r\n")},
		{name: "two Content-Lengths", raw: post("/v1/orders", "Content-Length: 5\r\nContent-Length: 6\r\n", create)},
		{name: "negative Content-Length", raw: post("/v1/orders", "Content-Length: -1\r\n", create)},
		{name: "two keys", raw: post("/v1/orders", "Idempotency-Key: other\r\nContent-Length: "+strconv.Itoa(len(create))+"\r\n", create)},
		{name: "control character in key", raw: post("/v1/orders", "Idempotency-Key: a\x01b\r\nContent-Length: 2\r\n", "{}")},
		{name: "NUL in header", raw: "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-A: a\x00b\r\n\r\n"},
		{name: "header without colon", raw: "GET /healthz HTTP/1.1\r\nHost: localhost\r\nnocolon\r\n\r\n"},
		{name: "huge header", raw: "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("b", 70<<10) + "\r\n\r\n"},
		{name: "garbage request line", raw: "GARBAGE\r\n\r\n"},
		{name: "space in path", raw: "GET /v1/orders/a b HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{name: "absolute URI", raw: "GET http://elsewhere/v1/orders/" + id + " HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{name: "asterisk", raw: "OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{name: "HTTP/1.0 without Host", raw: "GET /v1/orders/" + id + " HTTP/1.0\r\n\r\n"},
		{name: "odd method", raw: "FOO /v1/orders HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{name: "expect continue without body", raw: post("/v1/orders", "Expect: 100-continue\r\nContent-Length: 40\r\n", ""), halfClose: true},
		{name: "pipelined", raw: post("/v1/orders", "Content-Length: "+strconv.Itoa(len(create))+"\r\n", create) + "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"},
	}
}

// sendRaw writes raw to the server and reads the first answer, if any: its status and first
// line. A closed connection without an answer is status 0 and no error.
func sendRaw(base, raw string, halfClose bool) (int, string, error) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		return 0, "", nil // the server closed the connection first: no answer
	}
	if halfClose {
		conn.(*net.TCPConn).CloseWrite()
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	for err == nil && res.StatusCode < 200 { // 100 Continue: the answer follows
		res, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		if errors := []string{"EOF", "connection reset"}; slices.ContainsFunc(errors, func(s string) bool { return strings.Contains(err.Error(), s) }) {
			return 0, "", nil
		}
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
	return res.StatusCode, res.Status + " " + string(b), nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}
