package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/api/apitest"
)

// rssKiB is the resident memory of process pid in KiB, -1 where /proc does not tell.
func rssKiB(pid int) int { return statusKiB(pid, "VmRSS") }

// anonKiB is the anonymous resident memory of process pid in KiB (RssAnon: the heap and the
// stacks, not the files it maps), -1 where /proc does not tell.
func anonKiB(pid int) int { return statusKiB(pid, "RssAnon") }

// statusKiB is the field of /proc/PID/status given in kB, -1 where /proc does not tell.
func statusKiB(pid int, field string) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// openFiles is how many file descriptors process pid holds, -1 where /proc does not tell.
func openFiles(pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(fds)
}

// Requests with methods a client makes up add no series to the request metric, however many
// there are: they count under the method "other". ORDERS_MADE_UP_METHODS sets how many are
// sent (64000 to measure what they cost: the test logs the server's memory and the size of
// /metrics).
func TestMadeUpMethodsFoldIntoOther(t *testing.T) {
	t.Parallel()
	n := 500
	if v := os.Getenv("ORDERS_MADE_UP_METHODS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ORDERS_MADE_UP_METHODS=%q: want a positive count", v)
		}
	}
	s := startServer(t, "")
	pid := s.current().cmd.Process.Pid
	before := rssKiB(pid)

	// Around apitest: the document has none of these methods.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	work := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	for range 8 {
		wg.Go(func() {
			for i := range work {
				req, err := http.NewRequest(fmt.Sprintf("MADEUP%d", i), s.url("/healthz"), nil)
				if err == nil {
					var res *http.Response
					if res, err = client.Do(req); err == nil {
						io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
				}
				if err != nil {
					failed.Do(func() { t.Errorf("request %d: %v", i, err) })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	client.CloseIdleConnections()
	after := rssKiB(pid)
	scrape := s.do(t, "GET", "/metrics", "", nil)
	t.Logf("%d made-up methods: server RSS %d KiB before, %d KiB after, %d KiB after a scrape of %d bytes of /metrics",
		n, before, after, rssKiB(pid), len(scrape.body))

	m := s.metrics(t)
	for series := range m {
		if strings.Contains(series, "MADEUP") {
			t.Fatalf("series %s names a made-up method", series)
		}
	}
	if got := m[`orders_http_request_duration_seconds_count{method="other",route="/healthz",status="405"}`]; got != float64(n) {
		t.Errorf("requests of method other on /healthz: %v; want %d", got, n)
	}
}

// Connections past --max-connections are answered 503 with Retry-After and closed at once,
// counted and logged, and never hold up the server; keep-alive connections left idle are
// closed after --idle-timeout, and new clients are then served.
func TestConnectionLimitAndIdleTimeout(t *testing.T) {
	t.Parallel()
	const max = 3
	s := startServer(t, "", "--max-connections", strconv.Itoa(max), "--idle-timeout", "1s", "--read-header-timeout", "60s")
	u, err := url.Parse(s.url(""))
	if err != nil {
		t.Fatal(err)
	}
	pid := s.current().cmd.Process.Pid
	fdsBefore := openFiles(pid)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}

	// Clients that send the start of their headers and stop hold their connections (until
	// --read-header-timeout); the next connection is one too many.
	var (
		slow        []net.Conn
		slowReaders []*bufio.Reader
	)
	for range max {
		c := dial()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		slow = append(slow, c)
	}
	over := dial()
	io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(over)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection over the limit: %v; want a 503", err)
	}
	checkProblem(t, readResponse(t, "connection over the limit", res), http.StatusServiceUnavailable, "unavailable")
	if res.Header.Get("Retry-After") != "1" || res.Header.Get("X-Request-Id") == "" {
		t.Errorf("the connection over the limit: header %v; want Retry-After: 1 and an X-Request-Id", res.Header)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection over the limit, after its answer: %v; want it closed", err)
	}
	fdsFull := openFiles(pid)

	// The slow clients finish their requests and leave their connections idle: the server
	// closes them after --idle-timeout.
	for _, c := range slow {
		io.WriteString(c, "\r\n")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, readResponse(t, "GET /healthz, slowly", res), http.StatusOK)
		if res.Close {
			t.Fatalf("the server closes a keep-alive connection after its answer")
		}
		slowReaders = append(slowReaders, br)
	}
	for _, br := range slowReaders {
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("an idle connection: %v; want it closed by the server after --idle-timeout", err)
		}
	}

	// A new client is served, and what happened is counted.
	m := s.metrics(t)
	for series, want := range map[string]float64{
		"orders_http_connections_refused_total": 1,
		"orders_http_connections_open":          1, // the scrape's
		"orders_http_connections_max":           max,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present: %v); want %v", series, got, ok, want)
		}
	}
	refusals := 0
	for _, l := range s.logLines(t) {
		if l.Msg == "connection refused" {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("%d log lines of refused connections; want 1", refusals)
	}
	t.Logf("server file descriptors: %d before, %d with %d connections open and one refused, %d after",
		fdsBefore, fdsFull, max, openFiles(pid))
}

// readResponse reads res into a response of the tests' kind.
func readResponse(t *testing.T, name string, res *http.Response) *response {
	t.Helper()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r := &response{req: name, status: res.StatusCode, header: res.Header, body: body}
	if len(body) > 0 && body[0] == '{' {
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&r.json); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return r
}

// A client's X-Request-Id becomes the correlation id of the events of its request only if it
// is 1 to 128 printable ASCII characters; another is replaced by a generated one, which the
// response names.
func TestRequestIDIsBounded(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for i, tc := range []struct {
		id   string
		kept bool
	}{
		{strings.Repeat("a", 128), true},
		{"with spaces and ~!@#", true},
		{strings.Repeat("b", 129), false},
		{strings.Repeat("c", 60<<10), false},
		{"tab\there", false},
	} {
		id, r := s.create(t, fmt.Sprintf("request-id-%d", i), "c-request-id", "X-Request-Id", tc.id)
		used := r.header.Get("X-Request-Id")
		if kept := used == tc.id; kept != tc.kept {
			t.Errorf("X-Request-Id %.40q (%d bytes): the response's is %.40q; want it kept: %v", tc.id, len(tc.id), used, tc.kept)
		}
		for _, e := range s.events(t, id) {
			if got := e.Metadata["correlationId"]; got != used {
				t.Errorf("X-Request-Id %.40q: event %s has correlation id %.40q; want the response's %.40q", tc.id, e.Type, got, used)
			}
		}
	}
}

// The body limit is 1 MiB exactly: a body of 1,048,576 bytes is taken, one of 1,048,577 is
// 413, whether its length is announced or it comes chunked.
func TestBodyLimitIsOneMiB(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const mib = 1 << 20
	const create = `{"customerId":"c-mib","currency":"EUR"}`
	exact := create + strings.Repeat(" ", mib-len(create)) // trailing spaces: still one JSON value
	createdID(t, s.do(t, "POST", "/v1/orders", "mib-exact", exact))
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders", "mib-over", exact+" "), http.StatusRequestEntityTooLarge, "payload-too-large")

	chunked := func(key, body string, invalid bool) *response {
		t.Helper()
		// A reader of unknown length: the client sends it chunked, without Content-Length.
		req, err := http.NewRequest("POST", s.url("/v1/orders"), io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		if invalid {
			req = apitest.ExpectInvalidRequest(req)
		}
		res, err := s.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return readResponse(t, "POST /v1/orders (chunked)", res)
	}
	createdID(t, chunked("mib-chunked-exact", exact, false))
	checkProblem(t, chunked("mib-chunked-over", exact+" ", true), http.StatusRequestEntityTooLarge, "payload-too-large")
}

// A body over the limit is answered with its 413 problem every time, never with a reset, up to
// a few MiB, announced or chunked, one at a time or several at once, to a client that reads
// while it sends (Go's) and to one on a slow network that reads only once it has sent
// everything: the server reads what the client still sends before it closes the connection.
func TestBodiesOverTheLimitAreAnswered(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const (
		mib        = 1 << 20
		create     = `{"customerId":"c-big","currency":"EUR"}`
		sequential = 5
		clients    = 4 // at once, each sending perClient
		perClient  = 2
		paced      = 2 // by a client that sends in pieces and reads once it has sent them all
	)
	var (
		mu       sync.Mutex
		failures []string
		sent     int
	)
	// note counts one request; failure says what went wrong, "" when nothing did.
	note := func(failure string) {
		mu.Lock()
		defer mu.Unlock()
		sent++
		if failure != "" {
			failures = append(failures, failure)
		}
	}
	send := func(name string, body []byte, chunked bool) {
		var b any = body
		if chunked {
			b = bytes.NewReader(body)
		}
		r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: "big-body", body: b, invalid: true})
		switch {
		case err != nil:
			note(fmt.Sprintf("%s: %v", name, err))
		case r.status != http.StatusRequestEntityTooLarge || r.problem() != "/problems/payload-too-large":
			note(fmt.Sprintf("%s: %v", name, r))
		default:
			checkProblemShape(t, r)
			note("")
		}
	}
	var slow sync.WaitGroup
	for _, size := range []int{2 * mib, 4 * mib} {
		body := []byte(create + strings.Repeat(" ", size-len(create)))
		for _, chunked := range []bool{false, true} {
			name := fmt.Sprintf("%d MiB with Content-Length", size/mib)
			if chunked {
				name = fmt.Sprintf("%d MiB chunked", size/mib)
			}
			for range sequential {
				send(name, body, chunked)
			}
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range perClient {
						send(name+", "+strconv.Itoa(clients)+" at once", body, chunked)
					}
				})
			}
			wg.Wait()
			// Sent in 16 pieces 80 ms apart: longer than net/http waits between its answer
			// and closing the connection (500 ms), shorter than the server drains (3 s).
			raw := rawPost("/v1/orders", body, chunked)
			for range paced {
				slow.Go(func() {
					res, answer, err := sendPaced(s.url(""), raw, 16, 80*time.Millisecond)
					switch {
					case err != nil:
						note(fmt.Sprintf("%s, sent in pieces: %v", name, err))
					case res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(answer), `"/problems/payload-too-large"`):
						note(fmt.Sprintf("%s, sent in pieces: %s %.200q", name, res.Status, answer))
					default:
						note("")
					}
				})
			}
		}
	}
	slow.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d bodies over the limit were not answered 413 payload-too-large; the first:\n%s",
			len(failures), sent, strings.Join(failures[:min(len(failures), 5)], "\n"))
	}
}

// rawPost is a POST of body to path as written on the wire, its length announced or chunked.
func rawPost(path string, body []byte, chunked bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nIdempotency-Key: raw\r\n", path)
	if !chunked {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
		return b.String()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	for chunk := range slices.Chunk(body, 64<<10) {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// sendPaced writes raw to the server in pieces, pause apart, as a client on a slow network
// would, and reads the answer only then. The server closing the connection before the client
// has read its answer is an error.
func sendPaced(base, raw string, pieces int, pause time.Duration) (*http.Response, []byte, error) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(requestTimeout))
	size := (len(raw) + pieces - 1) / pieces
	for i := 0; i < len(raw); i += size {
		if i > 0 {
			time.Sleep(pause)
		}
		if _, err := io.WriteString(conn, raw[i:min(i+size, len(raw))]); err != nil {
			return nil, nil, fmt.Errorf("after %d of %d bytes sent: %w", i, len(raw), err)
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("all %d bytes sent, then: %w", len(raw), err)
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res, answer, err
}

// HEAD is answered wherever GET is, with its status and headers and no body, to the same
// callers; 401 names the scheme it wants, whose name may come in any case.
func TestHeadAndBearer(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := s.aliceOrder(t, "head-order")
	lower := []string{"Authorization", "bearer " + strings.TrimPrefix(alice[1], "Bearer ")}
	got := s.ok(t, lower, http.StatusOK, "GET", "/v1/orders/"+id, "", nil)

	head := func(path string, caller []string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("HEAD", s.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if caller != nil {
			req.Header.Set(caller[0], caller[1])
		}
		// Around apitest: the document lists GET alone.
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, body
	}
	for _, tc := range []struct {
		path   string
		caller []string
		status int
	}{
		{"/v1/orders/" + id, alice, http.StatusOK},
		{"/v1/orders/" + id, lower, http.StatusOK},
		{"/v1/orders/" + id, bob, http.StatusNotFound}, // alice's
		{"/v1/orders/" + id + "/events", audrey, http.StatusOK},
		{"/v1/orders", nil, http.StatusUnauthorized},
		{"/metrics", adam, http.StatusOK},
		{"/metrics", alice, http.StatusForbidden},
		{"/healthz", nil, http.StatusOK},
		{"/openapi.yaml", nil, http.StatusOK},
	} {
		res, body := head(tc.path, tc.caller)
		if res.StatusCode != tc.status || len(body) != 0 || res.Header.Get("X-Request-Id") == "" {
			t.Errorf("HEAD %s: %s, %d bytes of body, X-Request-Id %q; want %d, no body", tc.path, res.Status, len(body), res.Header.Get("X-Request-Id"), tc.status)
		}
	}
	res, _ := head("/v1/orders/"+id, alice)
	for _, h := range []string{"Content-Type", "ETag", "Log-Position"} {
		if res.Header.Get(h) != got.header.Get(h) {
			t.Errorf("HEAD /v1/orders/{id}: %s %q, GET's %q", h, res.Header.Get(h), got.header.Get(h))
		}
	}

	for _, caller := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic YTpi"}} {
		r := s.as(t, caller, "GET", "/v1/orders", "", nil)
		checkProblem(t, r, http.StatusUnauthorized, "unauthorized")
		if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("%v: WWW-Authenticate %q; want the Bearer scheme", r, got)
		}
	}
}

// Development mode answers only requests to a loopback name: a page of another site whose
// name resolves to 127.0.0.1 (DNS rebinding) sends its own Host, and is refused 403.
func TestDevelopmentModeAnswersLoopbackHostsOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for host, want := range map[string]int{
		"evil.example": http.StatusForbidden, "evil.example:80": http.StatusForbidden, "127.0.0.1.nip.io": http.StatusForbidden,
		"localhost": http.StatusOK, "127.0.0.1": http.StatusOK, "[::1]:8080": http.StatusOK, "app.localhost": http.StatusOK,
	} {
		req, err := http.NewRequest("GET", s.url("/v1/orders"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d; want %d", host, res.StatusCode, want)
		}
	}
}
