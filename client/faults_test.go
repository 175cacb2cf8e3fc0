package client

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultCalls is how many logical flows TestPromiseThroughFaults runs: each is a create, a start
// payment, a confirm payment, a shipment, a refund request and a refund completion, flowCommands
// commands. 200 meet every kind of fault many times; ORDERS_SOAK, which .ci/run sets for its
// soak after the test command, runs 1,000.
var faultCalls = func() int {
	if os.Getenv("ORDERS_SOAK") != "" {
		return 1000
	}
	return 200
}()

const flowCommands = 6

// Timings of the fault test: a delayed request outlasts the client's attempt timeout.
const (
	faultAttemptTimeout = time.Second
	faultDelay          = 1300 * time.Millisecond
	faultWorkers        = 32
)

// mischief is what the proxy does to one request.
type mischief int

const (
	forward    mischief = iota // pass it on untouched
	dropBefore                 // close the connection without forwarding
	dropAfter                  // forward, let the service answer, then close without answering
	delay                      // wait past the client's attempt timeout, then forward
	busy503                    // answer 503 with Retry-After 0 or 1 without forwarding
	busy429                    // answer 429 with Retry-After 0 or 1 without forwarding
	faultKinds
)

var faultNames = [faultKinds]string{"forwarded", "dropped before", "dropped after", "delayed", "503", "429"}

// faultProxy forwards requests to the service, and does one of the faults to about a third.
type faultProxy struct {
	target    *url.URL
	transport http.RoundTripper
	counts    [faultKinds]atomic.Int64
}

func (p *faultProxy) pick() mischief {
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
		status := map[mischief]int{busy503: 503, busy429: 429}[f]
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

// flowResult is what one flow ended with.
type flowResult struct {
	orderID  string
	attempts int
	replayed int
	position uint64
	err      error
}

// TestPromiseThroughFaults runs faultCalls flows, from creating an order to refunding it,
// concurrently through a proxy that drops, delays and refuses requests, and checks the promise:
// every caller succeeds, each logical create made exactly one order, and each other command of
// the flow had its effect once.
func TestPromiseThroughFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service")
	}
	base := startTestService(t)
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
	checkEffectsOnce(t, New(base), byCustomer)
	var faults []string
	for f := range faultKinds {
		faults = append(faults, fmt.Sprintf("%s %d", faultNames[f], proxy.counts[f].Load()))
	}
	t.Logf("%d flows (%d commands) in %v: %d attempts, %d replayed answers; proxy: %s",
		faultCalls, flowCommands*faultCalls, elapsed.Round(time.Millisecond), attempts, replayed, strings.Join(faults, ", "))
}

func customer(i int) string { return fmt.Sprintf("c-%04d", i) }

// runFlows runs n flows on workers goroutines.
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

// flowStep is a command of a flow and the status its answer must show.
type flowStep struct {
	name string
	want string
	run  func() (Order, Meta, error)
}

// flow creates order i, pays, ships and refunds it in full, each step one logical call.
func flow(ctx context.Context, c *Client, i int) flowResult {
	var r flowResult
	total, payment, refund := Money(2*(100+i)), fmt.Sprintf("pay-%d", i), fmt.Sprintf("rf-%d", i)
	steps := []flowStep{
		{"create", StatusCreated, func() (Order, Meta, error) {
			return c.CreateOrder(ctx, CreateOrderRequest{CustomerID: customer(i), Currency: "EUR",
				Lines: []LineInput{{SKU: "sku-1", Quantity: 2, UnitPrice: total / 2}}})
		}},
		{"start payment", StatusPaying, func() (Order, Meta, error) {
			return c.StartPayment(ctx, r.orderID, StartPaymentRequest{PaymentID: payment, Amount: total})
		}},
		{"confirm payment", StatusPaid, func() (Order, Meta, error) { return c.ConfirmPayment(ctx, r.orderID, payment, total) }},
		{"ship", StatusShipped, func() (Order, Meta, error) {
			return c.Ship(ctx, r.orderID, ShipRequest{Carrier: "DHL", TrackingNumber: fmt.Sprintf("JJD%06d", i)})
		}},
		{"request refund", StatusRefunding, func() (Order, Meta, error) {
			return c.RequestRefund(ctx, r.orderID, RequestRefundRequest{RefundID: refund, Amount: total})
		}},
		{"complete refund", StatusRefunded, func() (Order, Meta, error) { return c.CompleteRefund(ctx, r.orderID, refund) }},
	}
	for _, s := range steps {
		o, m, err := s.run()
		r.attempts += m.Attempts
		r.position = max(r.position, m.LogPosition)
		if m.Replayed {
			r.replayed++
		}
		if err == nil && o.Status != s.want {
			err = fmt.Errorf("status %s, want %s", o.Status, s.want)
		}
		if err != nil {
			r.err = fmt.Errorf("%s: %w", s.name, err)
			return r
		}
		r.orderID = o.ID
	}
	return r
}

// checkOneOrderEach lists every order through the faulty proxy and checks that each customer
// has exactly the one order its create returned, refunded.
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
		if want := byCustomer[o.CustomerID]; o.ID != want || o.Status != StatusRefunded {
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

// flowEffects are the types, without their version, of the events one flow must leave, once
// each: the create records its one line as a line added.
var flowEffects = map[string]int{
	"order.created": 1, "order.line-added": 1, "order.payment-started": 1, "order.payment-confirmed": 1,
	"order.shipped": 1, "order.refund-requested": 1, "order.refund-completed": 1,
}

// checkEffectsOnce reads each order's events from the service directly and checks that they are
// flowEffects: each command of the flow had its effect once, and nothing else happened.
func checkEffectsOnce(t *testing.T, direct *Client, byCustomer map[string]string) {
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
				counts[unversioned(e.Type)]++
			}
			if !maps.Equal(counts, flowEffects) {
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("order %s events %v, want %v", id, counts, flowEffects)
			}
		})
	}
	wg.Wait()
}

// unversioned is an event type without its version: "order.created" for "order.created.v3".
func unversioned(typ string) string {
	if i := strings.LastIndex(typ, ".v"); i > 0 {
		return typ[:i]
	}
	return typ
}
