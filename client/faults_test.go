package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// faultCalls is how many logical create-and-pay flows TestPromiseThroughFaults runs: each is a
// create, a start payment and a confirm payment, three commands.
const faultCalls = 1000

// Timings of the fault test: a delayed request outlasts the client's attempt timeout.
const (
	faultAttemptTimeout = time.Second
	faultDelay          = 1300 * time.Millisecond
	faultWorkers        = 32
)

// moduleRoot walks up from the working directory to the directory of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// startService builds ./cmd/api and serves a fresh data directory in development mode on a
// free loopback port; it returns the base URL. The process is stopped with SIGTERM at cleanup.
func startService(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "api")
	build := exec.Command("go", "build", "-o", bin, "./cmd/api")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/api: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "API_") { // a developer's settings must not change the server
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // how it exits is not this test's point
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- addr
			}
		}
	}()
	select {
	case addr := <-lines:
		return addr
	case <-exited:
		t.Fatalf("the server exited before listening:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not print its listening line within 30 s")
	}
	return ""
}

// fault is what the proxy does to one request.
type fault int

const (
	forward    fault = iota // pass it on untouched
	dropBefore              // close the connection without forwarding
	dropAfter               // forward, let the service answer, then close without answering
	delay                   // wait past the client's attempt timeout, then forward
	busy503                 // answer 503 with Retry-After 0 or 1 without forwarding
	busy429                 // answer 429 with Retry-After 0 or 1 without forwarding
	faultKinds
)

var faultNames = [faultKinds]string{"forwarded", "dropped before", "dropped after", "delayed", "503", "429"}

// faultProxy forwards requests to the service, and does one of the faults to about a third.
type faultProxy struct {
	target    *url.URL
	transport http.RoundTripper
	counts    [faultKinds]atomic.Int64
}

func (p *faultProxy) pick() fault {
	switch n := rand.IntN(100); {
	case n < 8:
		return dropBefore
	case n < 16:
		return dropAfter
	case n < 20:
		return delay
	case n < 26:
		return busy503
	case n < 30:
		return busy429
	}
	return forward
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := p.pick()
	p.counts[f].Add(1)
	switch f {
	case dropBefore:
		hangUp(w)
		return
	case busy503, busy429:
		status := map[fault]int{busy503: 503, busy429: 429}[f]
		w.Header().Set("Retry-After", fmt.Sprint(rand.IntN(2)))
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"/problems/unavailable","title":"Service unavailable","status":%d,"detail":"the proxy says so"}`, status)
		return
	case delay:
		time.Sleep(faultDelay)
	}
	res, body, err := p.forward(r)
	if err != nil || f == dropAfter {
		hangUp(w)
		return
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	w.Write(body)
}

// forward sends r to the service and reads its whole answer. The request outlives the client's
// connection, as it does on a real network: the service carries out what it received.
func (p *faultProxy) forward(r *http.Request) (*http.Response, []byte, error) {
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	res, err := p.transport.RoundTrip(out)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// flowResult is what one create-and-pay flow ended with.
type flowResult struct {
	orderID  string
	attempts int
	replayed int
	position uint64
	err      error
}

// TestPromiseThroughFaults runs faultCalls create-and-pay flows concurrently through a proxy
// that drops, delays and refuses requests, and checks the promise: every caller succeeds, each
// logical create made exactly one order, and each payment was started and confirmed once.
func TestPromiseThroughFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service")
	}
	base := startService(t)
	target, _ := url.Parse(base)
	proxy := &faultProxy{target: target, transport: &http.Transport{MaxIdleConnsPerHost: 2 * faultWorkers}}
	front := httptest.NewServer(proxy)
	defer front.Close()
	c := New(front.URL, WithAttemptTimeout(faultAttemptTimeout), WithMaxAttempts(15),
		WithBackoff(20*time.Millisecond, time.Second),
		WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: faultWorkers}}))

	start := time.Now()
	results := runFlows(t.Context(), c, faultCalls, faultWorkers)
	elapsed := time.Since(start)

	var attempts, replayed, failed int
	var maxPos uint64
	byCustomer := map[string]string{}
	for i, r := range results {
		attempts, replayed, maxPos = attempts+r.attempts, replayed+r.replayed, max(maxPos, r.position)
		if r.err != nil {
			if failed++; failed <= 5 {
				t.Errorf("flow %d failed: %v", i, r.err)
			}
			continue
		}
		byCustomer[customer(i)] = r.orderID
	}
	if failed > 0 {
		t.Fatalf("%d of %d flows failed", failed, faultCalls)
	}
	checkOneOrderEach(t, c, byCustomer, maxPos)
	checkPaidOnce(t, New(base), byCustomer)
	var faults []string
	for f := range faultKinds {
		faults = append(faults, fmt.Sprintf("%s %d", faultNames[f], proxy.counts[f].Load()))
	}
	t.Logf("%d flows (%d commands) in %v: %d attempts, %d replayed answers; proxy: %s",
		faultCalls, 3*faultCalls, elapsed.Round(time.Millisecond), attempts, replayed, strings.Join(faults, ", "))
}

func customer(i int) string { return fmt.Sprintf("c-%04d", i) }

// runFlows runs n create, start payment, confirm payment flows on workers goroutines.
func runFlows(ctx context.Context, c *Client, n, workers int) []flowResult {
	results := make([]flowResult, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = flow(ctx, c, i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

func flow(ctx context.Context, c *Client, i int) flowResult {
	var r flowResult
	note := func(m Meta) {
		r.attempts += m.Attempts
		r.position = max(r.position, m.LogPosition)
		if m.Replayed {
			r.replayed++
		}
	}
	price := Money(100 + i)
	o, m, err := c.CreateOrder(ctx, CreateOrderRequest{CustomerID: customer(i), Currency: "EUR",
		Lines: []LineInput{{SKU: "sku-1", Quantity: 2, UnitPrice: price}}})
	note(m)
	if err != nil {
		r.err = fmt.Errorf("create: %w", err)
		return r
	}
	r.orderID = o.ID
	payment := fmt.Sprintf("pay-%d", i)
	_, m, err = c.StartPayment(ctx, o.ID, StartPaymentRequest{PaymentID: payment, Amount: 2 * price})
	note(m)
	if err != nil {
		r.err = fmt.Errorf("start payment: %w", err)
		return r
	}
	o, m, err = c.ConfirmPayment(ctx, o.ID, payment, 2*price)
	note(m)
	if err == nil && o.Status != StatusPaid {
		err = fmt.Errorf("status %s after confirming", o.Status)
	}
	if err != nil {
		r.err = fmt.Errorf("confirm payment: %w", err)
	}
	return r
}

// checkOneOrderEach lists every order through the faulty proxy and checks that each customer
// has exactly the one order its create returned, paid.
func checkOneOrderEach(t *testing.T, c *Client, byCustomer map[string]string, pos uint64) {
	t.Helper()
	seen := map[string]int{}
	n := 0
	for o, err := range c.ListOrders(t.Context(), ListOptions{PageSize: 100}, WithMinPosition(pos)) {
		if err != nil {
			t.Fatalf("list orders: %v", err)
		}
		n++
		seen[o.CustomerID]++
		if want := byCustomer[o.CustomerID]; o.ID != want || o.Status != StatusPaid {
			t.Errorf("order %s of %s is %s; the create returned %s", o.ID, o.CustomerID, o.Status, want)
		}
	}
	for cust := range byCustomer {
		if seen[cust] != 1 {
			t.Errorf("customer %s has %d orders, want 1", cust, seen[cust])
		}
	}
	if n != len(byCustomer) {
		t.Errorf("%d orders listed, want %d", n, len(byCustomer))
	}
}

// checkPaidOnce reads each order's events from the service directly and checks that its
// payment was started once and confirmed once.
func checkPaidOnce(t *testing.T, direct *Client, byCustomer map[string]string) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range byCustomer {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			counts := map[string]int{}
			for e, err := range direct.Events(t.Context(), id) {
				if err != nil {
					counts["error: "+err.Error()]++
					break
				}
				counts[e.Type]++
			}
			if counts["order.payment-started.v1"] != 1 || counts["order.payment-confirmed.v1"] != 1 || counts["order.created.v2"] != 1 {
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("order %s events %v: want one created, one payment started, one confirmed", id, counts)
			}
		})
	}
	wg.Wait()
}
