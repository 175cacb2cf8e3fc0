package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/idempotency"
)

// metrics scrapes /metrics into series ("name{labels}") and their values.
func (s *server) metrics(t testing.TB, header ...string) map[string]float64 {
	t.Helper()
	r := s.do(t, "GET", "/metrics", "", nil, header...)
	wantStatus(t, r, 200)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	created := s.do(t, "POST", "/v1/orders", "metrics-create", orderFor("c-metrics"))
	id := createdID(t, created)
	checkReplay(t, created, s.do(t, "POST", "/v1/orders", "metrics-create", orderFor("c-metrics")))
	checkProblem(t, s.do(t, "POST", "/v1/orders", "metrics-create", orderFor("c-other")), 422, "idempotency-key-reused")
	s.command(t, id, "/cancel", "metrics-cancel", map[string]any{"reason": "test"})
	checkProblem(t, s.do(t, "POST", "/v1/orders/"+id+"/payments", "metrics-pay", map[string]any{"paymentId": "p", "amount": orderTotal}),
		409, "invalid-transition")
	s.order(t, id)
	checkProblem(t, s.doInvalid(t, "GET", "/no/such/route/"+id, "", nil), 404, "not-found")

	m := s.metrics(t)
	for series, want := range map[string]float64{
		`orders_commands_total{command="create-order",outcome="ok"}`:                                   1,
		`orders_commands_total{command="create-order",outcome="replayed"}`:                             1,
		`orders_commands_total{command="create-order",outcome="idempotency-key-reused"}`:               1,
		`orders_commands_total{command="cancel",outcome="ok"}`:                                         1,
		`orders_commands_total{command="start-payment",outcome="invalid-transition"}`:                  1,
		`orders_idempotency_keys_total{event="claimed"}`:                                               3,
		`orders_idempotency_keys_total{event="completed"}`:                                             3,
		`orders_idempotency_keys_total{event="replayed"}`:                                              1,
		`orders_idempotency_keys_total{event="mismatched"}`:                                            1,
		`orders_idempotency_keys_total{event="taken-over"}`:                                            0,
		`orders_idempotency_keys_total{event="expired"}`:                                               0,
		`orders_http_request_duration_seconds_count{method="POST",route="/v1/orders",status="201"}`:    2,
		`orders_http_request_duration_seconds_count{method="GET",route="/v1/orders/:id",status="200"}`: 1,
		`orders_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}`:      1,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present: %v); want %v", series, got, ok, want)
		}
	}
	for _, series := range []string{
		`orders_eventstore_append_seconds_count{result="ok"}`,
		`orders_eventstore_batch_size_count`,
		`orders_eventstore_batch_size_sum`,
	} {
		if m[series] < 1 {
			t.Errorf("%s = %v; want at least 1", series, m[series])
		}
	}
	// The write-ahead log's size is read after the first write, and then about once a second.
	for deadline := time.Now().Add(5 * time.Second); m[`orders_eventstore_wal_frames{frames="all"}`] < 1; m = s.metrics(t) {
		if time.Now().After(deadline) {
			t.Errorf("orders_eventstore_wal_frames{frames=\"all\"} = %v 5 s after the first write; want at least 1",
				m[`orders_eventstore_wal_frames{frames="all"}`])
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range []string{"orders", "lookups"} {
		for _, name := range []string{"checkpoint_position", "head_position", "lag_events", "lag_seconds"} {
			if _, ok := m[fmt.Sprintf(`orders_projection_%s{projection=%q}`, name, p)]; !ok {
				t.Errorf("no orders_projection_%s for %s", name, p)
			}
		}
	}
	if m[`orders_projection_checkpoint_position{projection="orders"}`] < 4 {
		t.Errorf("orders projection checkpoint %v; want it past the 4 events of the order", m[`orders_projection_checkpoint_position{projection="orders"}`])
	}
	for series := range m {
		if strings.Contains(series, id) || strings.Contains(series, "metrics-create") {
			t.Errorf("series %s names an order or a key: one series per value would grow without bound", series)
		}
	}
}

// logLine is a JSON line of the server's log, as far as these tests read it.
type logLine struct {
	Msg       string  `json:"msg"`
	Level     string  `json:"level"`
	Event     string  `json:"event"`
	KeyHash   string  `json:"key_hash"`
	Key       string  `json:"key"`
	RequestID string  `json:"request_id"`
	Principal *string `json:"principal"`
	Method    string  `json:"method"`
	Route     string  `json:"route"`
	Status    int     `json:"status"`
	LatencyMS *float64
}

func (s *server) logLines(t testing.TB) []logLine {
	t.Helper()
	var lines []logLine
	for raw := range strings.SplitSeq(s.current().stderr.String(), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q is not JSON: %v", raw, err)
		}
		var latency struct {
			LatencyMS *float64 `json:"latency_ms"`
		}
		json.Unmarshal([]byte(raw), &latency)
		l.LatencyMS = latency.LatencyMS
		lines = append(lines, l)
	}
	return lines
}

// The logs follow an idempotency key through its life by its hash: each request's one line
// names the key's hash and the steps it took there, with the request's id, principal, route
// and status, and no line names the key itself.
func TestLogsFollowAKeyByItsHash(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const key = "logs-follow-this-key"
	first := s.do(t, "POST", "/v1/orders", key, orderFor("c-logs"), "X-Request-Id", "logs-first")
	createdID(t, first)
	s.do(t, "POST", "/v1/orders", key, orderFor("c-logs"), "X-Request-Id", "logs-retry")
	s.do(t, "POST", "/v1/orders", key, orderFor("c-logs-other"), "X-Request-Id", "logs-other")

	hash := idempotency.KeyHash("local", key)
	want := map[string]string{"logs-first": "claimed completed", "logs-retry": "replayed", "logs-other": "mismatched"}
	got := map[string]logLine{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		for _, l := range s.logLines(t) {
			if l.Msg == "request" && want[l.RequestID] != "" {
				got[l.RequestID] = l
			}
		}
		time.Sleep(20 * time.Millisecond) // the log is read from the process's stderr
	}
	for id, steps := range want {
		l, ok := got[id]
		if !ok || l.KeyHash != hash || l.Key != steps || l.Principal == nil || *l.Principal != "local" ||
			l.Method != "POST" || l.Route != "/v1/orders" || l.LatencyMS == nil {
			t.Errorf("request log line of %s: %+v; want key_hash %s, key %q, principal local, POST /v1/orders and latency", id, l, hash, steps)
		}
	}
	if got["logs-first"].Status != 201 || got["logs-retry"].Status != 201 || got["logs-other"].Status != 422 {
		t.Errorf("statuses logged: %d, %d, %d; want 201, 201 (replayed) and 422", got["logs-first"].Status, got["logs-retry"].Status, got["logs-other"].Status)
	}
	for _, l := range s.logLines(t) {
		if l.Msg == "idempotency key" {
			t.Errorf("a key's step logged on a line of its own within a request: %+v", l)
		}
	}
	if strings.Contains(s.current().stderr.String(), key) {
		t.Errorf("the logs name the idempotency key %q itself", key)
	}
}

// slowConn is a client that sends its request one byte at a time, until the server cuts it.
type slowConn struct {
	sent int
	cut  chan struct{} // closed when the server has closed the connection
}

// trickle sends head at once, then rest one byte per interval, and reports when the server
// closes the connection (or answers and closes it).
func trickle(t *testing.T, addr, head, rest string, interval time.Duration, stop <-chan struct{}) *slowConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sc := &slowConn{cut: make(chan struct{})}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		io.Copy(io.Discard, conn) // returns when the server closes the connection
		close(sc.cut)
	}()
	go func() {
		for i := 0; i < len(rest); i++ {
			select {
			case <-sc.cut:
				return
			case <-stop:
				return
			case <-time.After(interval):
			}
			if _, err := conn.Write([]byte{rest[i]}); err != nil {
				return
			}
			sc.sent++
		}
	}()
	return sc
}

// Clients that send headers or a body too slowly are cut at the read timeouts, and meanwhile
// the others are served as usual: slow clients do not hold the server.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--read-header-timeout", "1s", "--read-timeout", "2s")
	u, err := url.Parse(s.url(""))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	const interval = 100 * time.Millisecond
	// Both would take a minute at this pace.
	slowHeaders := strings.Repeat("x", 600)
	body := `{"customerId":"c-slow","currency":"EUR","clientReference":"` + strings.Repeat("y", 550) + `"}`
	var conns []*slowConn
	for range 20 {
		conns = append(conns, trickle(t, u.Host, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", slowHeaders, interval, stop))
	}
	for i := range 5 {
		head := fmt.Sprintf("POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: slow-body-%d\r\nContent-Length: %d\r\n\r\n", i, len(body))
		conns = append(conns, trickle(t, u.Host, head, body, interval, stop))
	}

	// The others are served while the slow clients hold their connections.
	start := time.Now()
	for i := range 10 {
		createdID(t, s.do(t, "POST", "/v1/orders", fmt.Sprintf("slow-bystander-%d", i), orderFor("c-bystander")))
		wantStatus(t, s.do(t, "GET", "/healthz", "", nil), 200)
	}
	t.Logf("20 requests served in %v beside %d slow clients", time.Since(start), len(conns))

	for i, c := range conns {
		select {
		case <-c.cut:
		case <-time.After(30 * time.Second):
			t.Fatalf("slow client %d still connected after 30 s, having sent %d bytes", i, c.sent)
		}
	}
	// None of the slow POSTs ran: their keys were never claimed.
	for i := range 5 {
		r := s.do(t, "POST", "/v1/orders", fmt.Sprintf("slow-body-%d", i), orderFor("c-slow"))
		createdID(t, r)
		checkFirst(t, r)
	}
}

// Headers beyond the limit (64 KiB) are refused before any handler runs, with a problem like
// every other error. The answer is net/http's own, outside any route of the document, so the
// request goes around apitest.
func TestHeadersTooLargeAreRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	req, err := http.NewRequest("GET", s.url("/healthz"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("b", 100<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := readResponse(t, "GET /healthz with a 100 KiB header", res)
	checkProblem(t, r, http.StatusRequestHeaderFieldsTooLarge, "headers-too-large")
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("%v: no X-Request-Id", r)
	}
	wantStatus(t, s.do(t, "GET", "/healthz", "", nil), 200)
}

// A second server on the data directory a server is using refuses to start and says why; a
// killed server leaves nothing that stops the next one.
func TestSecondServerOnADataDirectoryRefuses(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr strings.Builder
	second := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--data", s.dir)
	second.Env, second.Stderr = hermeticEnv(), &stderr
	err := second.Run()
	if ctx.Err() != nil || err == nil || !strings.Contains(stderr.String(), "in use by another api serve") {
		t.Fatalf("second server: %v (timed out: %v); stderr: %s", err, ctx.Err() != nil, stderr.String())
	}
	s.kill(t)
	s.restart(t)
}
