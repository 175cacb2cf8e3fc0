package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/tests/load"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Webhook deliveries under load: with --webhooks N the harness registers N endpoints
// for the clients' principal before the server's lifecycles, each at its own path of a receiver
// in the harness that answers 204 at once, and checks every delivery: its signature (with the
// Standard Webhooks reference library, not the sender's code), one webhook-id per event, each
// order's events received in revision order, and after the run every event of every order of
// the ledger received by every endpoint.
const (
	maxWebhookEndpoints = 1000             // the server's default limit per client
	webhookStall        = 30 * time.Second // after the lifecycles, wait while deliveries arrive
	webhookDrain        = 10 * time.Minute // but no longer than this
	webhookProblems     = 10               // problem messages kept
)

// Webhooks are the figures of the deliveries.
type Webhooks struct {
	Endpoints int `json:"endpoints"`
	Requests  int `json:"requests"` // deliveries received, repeats included
	Events    int `json:"events"`   // distinct events received, summed over the endpoints
	// PerSecond is the distinct events received in the measured window, per second of it.
	PerSecond float64 `json:"deliveriesPerSecond"`
	// Lag is from an event's recorded time (the payload's createdAt, the server's clock on the
	// same machine) to its first receipt, for the events recorded in the measured window.
	Samples int           `json:"lagSamples"`
	P50     time.Duration `json:"lagP50Ns"`
	P99     time.Duration `json:"lagP99Ns"`
	Max     time.Duration `json:"lagMaxNs"`
	// Expected is the events of the ledger's orders, times the endpoints; Missing the ones an
	// endpoint had not received once webhookStall passed without a delivery after the
	// lifecycles (or webhookDrain, at most). Drain is how long that wait took.
	Drain         time.Duration `json:"drainNs"`
	Expected      int           `json:"expected"`
	Missing       int           `json:"missing"`
	OutOfOrder    int           `json:"outOfOrder"`    // an order's event received before an earlier one
	BadSignatures int           `json:"badSignatures"` // or bodies that are not a payload
	IDChanged     int           `json:"idChanged"`     // an event received again under another webhook-id
	Problems      []string      `json:"problems,omitempty"`
}

func (w *Webhooks) ok() bool {
	return w.Missing == 0 && w.OutOfOrder == 0 && w.BadSignatures == 0 && w.IDChanged == 0
}

// hookReceiver is the harness's receiver: /hook/{i} is endpoint i. Each endpoint has a port of
// its own (startHookReceiver), as endpoints of different receivers do: the server's connections
// are pooled per host and port.
type hookReceiver struct {
	mu        sync.Mutex
	endpoints []*hookEndpoint
	received  []receipt // first receipts, every endpoint's
	figures   Webhooks
}

// hookEndpoint is what one endpoint received: per order, the webhook-id of each revision, in
// the order received.
type hookEndpoint struct {
	verifier *standardwebhooks.Webhook
	orders   map[string][]string
}

type receipt struct {
	at, recorded time.Time
}

// payload is what the receiver reads of a delivery.
type payload struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	OrderID   string    `json:"orderId"`
	Revision  uint64    `json:"revision"`
}

// add makes endpoint i's state, verifying with its secret (whsec_…).
func (rc *hookReceiver) add(secret string) (int, error) {
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return 0, err
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.endpoints = append(rc.endpoints, &hookEndpoint{verifier: v, orders: map[string][]string{}})
	return len(rc.endpoints) - 1, nil
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	i, perr := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hook/"))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.figures.Requests++
	if err != nil || perr != nil || i < 0 || i >= len(rc.endpoints) {
		rc.problem(&rc.figures.BadSignatures, "%s: not a delivery to a registered endpoint (%v)", r.URL.Path, err)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	rc.receive(rc.endpoints[i], i, body, r.Header, at)
	w.WriteHeader(http.StatusNoContent)
}

// receive checks one delivery to endpoint i, received at at. Called with rc.mu held.
func (rc *hookReceiver) receive(ep *hookEndpoint, i int, body []byte, h http.Header, at time.Time) {
	var p payload
	if err := ep.verifier.Verify(body, h); err != nil {
		rc.problem(&rc.figures.BadSignatures, "endpoint %d: %v", i, err)
		return
	}
	if err := json.Unmarshal(body, &p); err != nil || p.OrderID == "" || p.ID != h.Get("webhook-id") {
		rc.problem(&rc.figures.BadSignatures, "endpoint %d: a body that is not a payload of webhook-id %q: %v", i, h.Get("webhook-id"), err)
		return
	}
	ids := ep.orders[p.OrderID]
	if p.Revision < uint64(len(ids)) && ids[p.Revision] != "" {
		if ids[p.Revision] != p.ID {
			rc.problem(&rc.figures.IDChanged, "endpoint %d: %s@%d as %s, earlier as %s", i, p.OrderID, p.Revision, p.ID, ids[p.Revision])
		}
		return // sent again: at least once
	}
	if p.Revision > uint64(len(ids)) {
		rc.problem(&rc.figures.OutOfOrder, "endpoint %d: %s@%d before @%d", i, p.OrderID, p.Revision, len(ids))
		ids = append(ids, make([]string, int(p.Revision)-len(ids))...)
	}
	if p.Revision == uint64(len(ids)) {
		ids = append(ids, p.ID)
	} else {
		ids[p.Revision] = p.ID // late: counted out of order when the later one came
	}
	ep.orders[p.OrderID] = ids
	rc.figures.Events++
	rc.received = append(rc.received, receipt{at: at, recorded: p.CreatedAt})
}

// problem counts a problem in counter and keeps its message if there is room. Called with rc.mu
// held.
func (rc *hookReceiver) problem(counter *int, format string, args ...any) {
	*counter++
	if len(rc.figures.Problems) < webhookProblems {
		rc.figures.Problems = append(rc.figures.Problems, fmt.Sprintf(format, args...))
	}
}

// missing counts the events of orders (order id → events in its stream) that some endpoint has
// not received.
func (rc *hookReceiver) missing(orders map[string]int) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, ep := range rc.endpoints {
		for id, events := range orders {
			got := 0
			for _, x := range ep.orders[id][:min(events, len(ep.orders[id]))] {
				if x != "" {
					got++
				}
			}
			n += events - got
		}
	}
	return n
}

// summary is the figures, with the lag of the events recorded in [from, to) and the rate of
// the first receipts in it.
func (rc *hookReceiver) summary(from, to time.Time) Webhooks {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	f := rc.figures
	f.Endpoints = len(rc.endpoints)
	var lags []time.Duration
	inWindow := 0
	for _, r := range rc.received {
		if !r.recorded.Before(from) && r.recorded.Before(to) {
			lags = append(lags, r.at.Sub(r.recorded))
		}
		if !r.at.Before(from) && r.at.Before(to) {
			inWindow++
		}
	}
	slices.Sort(lags)
	if n := len(lags); n > 0 {
		q := func(p float64) time.Duration { return lags[min(n-1, int(p*float64(n)))] }
		f.Samples, f.P50, f.P99, f.Max = n, q(0.50), q(0.99), lags[n-1]
	}
	if d := to.Sub(from).Seconds(); d > 0 {
		f.PerSecond = float64(inWindow) / d
	}
	f.Problems = slices.Clone(f.Problems)
	return f
}

// startHookReceiver serves rc on n loopback ports until ctx ends; it returns their base URLs.
func startHookReceiver(ctx context.Context, rc *hookReceiver, n int) ([]string, error) {
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		context.AfterFunc(ctx, func() { srv.Close() })
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, nil
}

// registerHooks registers an endpoint at the server for each receiver URL, for every event
// type, endpoint i at path /hook/{i} of hookURLs[i].
func registerHooks(ctx context.Context, server, token string, hookURLs []string, rc *hookReceiver) error {
	client := &http.Client{Timeout: 10 * time.Second}
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // a fresh key on a server used before
	for i, hookURL := range hookURLs {
		body, _ := json.Marshal(map[string]any{"url": fmt.Sprintf("%s/hook/%d", hookURL, i), "events": []string{"*"}, "description": "load harness"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/v1/webhook-endpoints", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("load-hook-%s-%d", run, i))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("register webhook endpoint %d: %w", i, err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var ep struct {
			Secret string `json:"secret"`
		}
		if res.StatusCode != http.StatusCreated || json.Unmarshal(raw, &ep) != nil {
			return fmt.Errorf("register webhook endpoint %d: %d %s", i, res.StatusCode, strings.TrimSpace(string(raw)))
		}
		if j, err := rc.add(ep.Secret); err != nil || j != i {
			return fmt.Errorf("webhook endpoint %d: secret %v", i, err)
		}
	}
	return nil
}

// orderEvents reads how many events each order of the ledger has (its version).
func orderEvents(ctx context.Context, server, token string, ledger *load.Ledger) (map[string]int, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	out := map[string]int{}
	for _, o := range ledger.Orders() {
		if o.ID == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/v1/orders/"+url.PathEscape(o.ID), nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("order %s: %w", o.ID, err)
		}
		var v struct {
			Version int `json:"version"`
		}
		err = json.NewDecoder(res.Body).Decode(&v)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || err != nil {
			return nil, fmt.Errorf("order %s: %d %v", o.ID, res.StatusCode, err)
		}
		out[o.ID] = v.Version
	}
	return out, nil
}

// checkHooks waits for every event of the ledger's orders to reach every endpoint, while
// deliveries arrive (see Webhooks.Missing), and returns the figures of the window [from, to).
func checkHooks(ctx context.Context, server, token string, ledger *load.Ledger, rc *hookReceiver, from, to time.Time) (*Webhooks, error) {
	orders, err := orderEvents(ctx, server, token, ledger)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	start := time.Now()
	last, lastAt := -1, start
	for missing := rc.missing(orders); missing > 0 && ctx.Err() == nil; missing = rc.missing(orders) {
		if missing != last {
			last, lastAt = missing, time.Now()
		}
		if time.Since(lastAt) > webhookStall || time.Since(start) > webhookDrain {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	f := rc.summary(from, to)
	f.Drain = time.Since(start)
	f.Missing = rc.missing(orders)
	for _, n := range orders {
		f.Expected += n * f.Endpoints
	}
	return &f, nil
}

// reportHooks prints the deliveries' figures.
func reportHooks(w io.Writer, h Webhooks) {
	fmt.Fprintf(w, "webhooks: %d endpoints, %d events of the ledger's orders expected: %d received (%d requests), %d missing, %d out of order, %d bad signatures or bodies, %d with another id\n",
		h.Endpoints, h.Expected, h.Events, h.Requests, h.Missing, h.OutOfOrder, h.BadSignatures, h.IDChanged)
	fmt.Fprintf(w, "webhook delivery lag (recorded → received), window: %d events, p50 %v, p99 %v, max %v; %.0f deliveries/s; the last arrived %v after the lifecycles\n",
		h.Samples, round(h.P50), round(h.P99), round(h.Max), h.PerSecond, round(h.Drain))
	for _, p := range h.Problems {
		fmt.Fprintln(w, "  webhook problem:", p)
	}
}
