// Package load drives the order service over HTTP with many concurrent clients running order
// lifecycles, keeps a ledger of every acknowledged command, and checks the ledger against the
// server: nothing acknowledged is lost, nothing is applied twice, every replay is identical to
// the first answer.
package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a workload. Set URL; the other fields have defaults.
type Config struct {
	// URL returns the server's base URL now, such as "http://127.0.0.1:8080". It is called for
	// every request, so a restarted server may come back on another port.
	URL func() string
	// Transport sends the requests; nil means NewTransport(Clients).
	Transport http.RoundTripper
	// Token is the bearer API key; empty for a server in development mode.
	Token string
	// Clients is the number of concurrent clients; 0 means 64.
	Clients int
	// Orders is the number of order lifecycles to run in all; 0 means as many as fit in
	// Duration.
	Orders int
	// Duration is how long the measured window lasts when Orders is 0; 0 means 10 seconds.
	Duration time.Duration
	// Warmup runs the workload unmeasured before the window starts.
	Warmup time.Duration
	// RetryShare is the share of commands sent again with the same key: half of them again
	// after the first answer, half as 2 to 4 concurrent copies.
	RetryShare float64
	// Deliveries is how many times each payment confirmation is delivered, concurrently:
	// about half of them retries with the first delivery's key, the others with a fresh key
	// each, as a payment provider's callbacks do. 0 means 3.
	Deliveries int
	// CancelShare, FailShare and RefundShare are the shares of orders cancelled (half before
	// payment, half while paying), whose first payment fails, and refunded after shipping.
	CancelShare, FailShare, RefundShare float64
	// Seed seeds each client's choices (which lifecycle number a client draws next depends
	// on timing); the key names come from Run.
	Seed uint64
	// Run prefixes every key and customer id, so that runs against one server do not meet.
	Run string
	// Patience is how long a request is retried after transport errors and 5xx answers, for
	// a server that crashes and comes back. 0 means not at all: such a request is an error.
	Patience time.Duration
	// RequestTimeout bounds one request, and how long answers of 409 in-flight or concurrent
	// modification are retried; 0 means 30 seconds.
	RequestTimeout time.Duration
	// CreatesOnly ends each lifecycle after its create: the keyed creates alone, which a
	// target that only knows creates can serve too.
	CreatesOnly bool
	// Baseline marks a target that stores nothing: answers are not checked against orders.
	Baseline bool
	// Stop, when closed, ends the run: each client stops after the command it is on.
	Stop <-chan struct{}
}

func (c *Config) defaults() {
	if c.Clients <= 0 {
		c.Clients = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Deliveries <= 0 {
		c.Deliveries = 3
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.Run == "" {
		c.Run = fmt.Sprintf("run%x", rand.Uint32())
	}
	if c.Transport == nil {
		c.Transport = NewTransport(c.Clients)
	}
}

// Result is what a run did.
type Result struct {
	Stats  Stats
	Ledger *Ledger
}

// Run runs the workload until Orders lifecycles are done, or until the window ends, or ctx
// ends. Errors are counted in the stats; the returned error is only ctx's.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	client := &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ledger := &Ledger{}
	start := time.Now()
	from := start.Add(cfg.Warmup)
	until := from.Add(cfg.Duration)
	var next atomic.Int64
	stop := func() bool {
		if ctx.Err() != nil {
			return true
		}
		select {
		case <-cfg.Stop:
			return true
		default:
		}
		if cfg.Orders > 0 {
			return false
		}
		return time.Now().After(until)
	}
	recs := make([]*recorder, cfg.Clients)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		recs[i] = &recorder{}
		w := &worker{cfg: &cfg, client: client, rec: recs[i], ledger: ledger, stop: stop,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)))}
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if (cfg.Orders > 0 && n >= cfg.Orders) || stop() {
					return
				}
				w.lifecycle(ctx, n)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	if cfg.Orders > 0 || end.Before(until) {
		until = end
	}
	if from.After(until) {
		from = start
	}
	return &Result{Stats: stats(recs, from, until), Ledger: ledger}, ctx.Err()
}

// worker is one client: it runs lifecycles one after the other.
type worker struct {
	cfg    *Config
	client *http.Client
	rec    *recorder
	ledger *Ledger
	rng    *rand.Rand
	stop   func() bool
}

func (w *worker) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

// Event types the workload expects, as the event history shows them (at their current version).
const (
	evCreated          = "order.created.v2"
	evLineAdded        = "order.line-added.v2"
	evQuantityChanged  = "order.line-quantity-changed.v1"
	evPaymentStarted   = "order.payment-started.v1"
	evPaymentConfirmed = "order.payment-confirmed.v1"
	evPaymentFailed    = "order.payment-failed.v1"
	evCancelled        = "order.cancelled.v1"
	evShipped          = "order.shipped.v1"
	evRefundRequested  = "order.refund-requested.v1"
	evRefundCompleted  = "order.refund-completed.v1"
)

type lineBody struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// lifecycle runs order n from creation to its end: lines, payment (failing first sometimes),
// confirmation delivered several times, shipment, a refund sometimes; or a cancellation.
func (w *worker) lifecycle(ctx context.Context, n int) {
	name := fmt.Sprintf("%s-%d", w.cfg.Run, n)
	o, ok := w.create(ctx, name)
	if !ok || w.cfg.CreatesOnly {
		return
	}
	l := &life{w: w, ctx: ctx, o: o, name: name, path: "/v1/orders/" + o.ID}
	if !l.addLines() {
		return
	}
	cancelling := w.chance(w.cfg.CancelShare)
	if cancelling && w.rng.IntN(2) == 0 {
		l.cancel("before payment")
		return
	}
	payment, ok := l.pay()
	if !ok {
		return
	}
	if cancelling {
		l.cancel("while paying")
		return
	}
	if w.stop() || !w.deliver(ctx, o, l.path, payment) {
		return
	}
	if !l.step(&Command{Name: "ship", Method: http.MethodPost, Path: l.path + "/shipments", Key: name + "-ship",
		Body: mustJSON(map[string]string{"carrier": "dhl", "trackingNumber": "trk-" + name}), Effects: []string{evShipped}}, l.status("shipped")) {
		return
	}
	if w.chance(w.cfg.RefundShare) {
		l.refund()
	}
}

// create creates order name with one to three lines, and adds it to the ledger first. It
// reports whether the create was acknowledged with the order's id.
func (w *worker) create(ctx context.Context, name string) (*Order, bool) {
	o := &Order{Status: "created", Lines: map[string]Line{}}
	w.ledger.add(o)
	var lines []lineBody
	effects := []string{evCreated}
	for i := range 1 + w.rng.IntN(3) {
		l := lineBody{SKU: fmt.Sprintf("sku-%d", i+1), Quantity: 1 + w.rng.Int64N(5), UnitPrice: 100 * (1 + w.rng.Int64N(50))}
		lines = append(lines, l)
		effects = append(effects, evLineAdded)
	}
	create := &Command{Name: "create-order", Method: http.MethodPost, Path: "/v1/orders", Key: name + "-create",
		Body:    mustJSON(map[string]any{"customerId": "cust-" + name, "currency": "EUR", "lines": lines, "clientReference": name}),
		Effects: effects}
	r, ok := w.command(ctx, o, create, http.StatusCreated)
	if !ok {
		return o, false
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil || created.ID == "" {
		w.rec.errorf("%s: create answered %v: no order id", create.Key, r)
		return o, false
	}
	o.ID = created.ID
	for _, l := range lines {
		o.Lines[l.SKU] = Line{Quantity: l.Quantity, UnitPrice: l.UnitPrice}
	}
	o.check(w, r)
	return o, true
}

// life is the rest of an order's lifecycle after its create: the commands on order o, named
// name, at path.
type life struct {
	w          *worker
	ctx        context.Context
	o          *Order
	name, path string
}

// step sends c unless the run is stopping and, once it is acknowledged, applies its effect to
// the order and checks the answer against it.
func (l *life) step(c *Command, apply func()) bool {
	if l.w.stop() {
		return false
	}
	r, ok := l.w.command(l.ctx, l.o, c, http.StatusOK)
	if ok {
		apply()
		l.o.check(l.w, r)
	}
	return ok
}

// status is the effect of a command that moves the order to status s.
func (l *life) status(s string) func() { return func() { l.o.Status = s } }

// addLines adds up to three lines, some of them a SKU the order has, whose quantity grows.
func (l *life) addLines() bool {
	w, o := l.w, l.o
	for i := range w.rng.IntN(4) {
		line := lineBody{SKU: fmt.Sprintf("sku-%d", len(o.Lines)+1), Quantity: 1 + w.rng.Int64N(5), UnitPrice: 100 * (1 + w.rng.Int64N(50))}
		effect := evLineAdded
		if w.rng.IntN(3) == 0 {
			// The same SKU at the same price again: the line's quantity grows.
			line.SKU = fmt.Sprintf("sku-%d", 1+w.rng.IntN(len(o.Lines)))
			line.UnitPrice = o.Lines[line.SKU].UnitPrice
			effect = evQuantityChanged
		}
		c := &Command{Name: "add-line", Method: http.MethodPost, Path: l.path + "/lines", Key: fmt.Sprintf("%s-line-%d", l.name, i),
			Body: mustJSON(line), Effects: []string{effect}}
		if !l.step(c, func() {
			o.Lines[line.SKU] = Line{Quantity: o.Lines[line.SKU].Quantity + line.Quantity, UnitPrice: line.UnitPrice}
		}) {
			return false
		}
	}
	return true
}

func (l *life) cancel(when string) {
	l.step(&Command{Name: "cancel", Method: http.MethodPost, Path: l.path + "/cancel", Key: l.name + "-cancel",
		Body: mustJSON(map[string]string{"reason": "customer asked " + when}), Effects: []string{evCancelled}}, l.status("cancelled"))
}

// pay starts a payment, as FailShare says fails it and starts a second; it returns the id of
// the payment in progress.
func (l *life) pay() (string, bool) {
	payment := l.name + "-pay-1"
	if !l.startPayment(payment) {
		return "", false
	}
	if !l.w.chance(l.w.cfg.FailShare) {
		return payment, true
	}
	if !l.step(&Command{Name: "fail-payment", Method: http.MethodPost, Path: l.path + "/payments/" + payment + "/fail", Key: payment + "-fail",
		Body: mustJSON(map[string]string{"reason": "card declined"}), Effects: []string{evPaymentFailed}}, l.status("created")) {
		return "", false
	}
	payment = l.name + "-pay-2"
	return payment, l.startPayment(payment)
}

func (l *life) startPayment(paymentID string) bool {
	return l.step(&Command{Name: "start-payment", Method: http.MethodPost, Path: l.path + "/payments", Key: paymentID + "-start",
		Body: mustJSON(map[string]any{"paymentId": paymentID, "amount": l.o.total()}), Effects: []string{evPaymentStarted}}, l.status("paying"))
}

// refund requests a refund of part of what was paid and completes it.
func (l *life) refund() {
	refund, amount := l.name+"-refund", 1+l.w.rng.Int64N(l.o.Paid)
	if !l.step(&Command{Name: "request-refund", Method: http.MethodPost, Path: l.path + "/refunds", Key: refund + "-request",
		Body: mustJSON(map[string]any{"refundId": refund, "amount": amount}), Effects: []string{evRefundRequested}}, l.status("refunding")) {
		return
	}
	l.step(&Command{Name: "complete-refund", Method: http.MethodPost, Path: l.path + "/refunds/" + refund + "/complete", Key: refund + "-complete",
		Body: []byte("{}"), Effects: []string{evRefundCompleted}}, func() { l.o.Status, l.o.Refunded = "refunded", amount })
}

// command sends c, again as RetryShare says, and records its answer in o. It reports whether
// the command was acknowledged with status want.
func (w *worker) command(ctx context.Context, o *Order, c *Command, want int) (reply, bool) {
	req := c.request()
	copies := 1
	again := false
	if w.chance(w.cfg.RetryShare) {
		if w.rng.IntN(2) == 0 {
			again = true
		} else {
			copies = 2 + w.rng.IntN(3)
		}
	}
	first, ok := w.concurrently(ctx, req, copies)
	if !ok {
		o.unknown(c)
		return reply{}, false
	}
	w.acknowledge(o, c, first)
	if first.status != want {
		w.rec.errorf("%v: %v, want %d", req, first, want)
		return first, false
	}
	if again {
		r, err := w.settle(ctx, req)
		if err != nil {
			w.rec.errorf("retry: %v", err)
		} else if diff := sameAnswer(first, r); diff != "" && !w.cfg.Baseline {
			w.rec.errorf("%v sent again: not a replay of the first answer: %s", req, diff)
		}
	}
	return first, true
}

// concurrently sends copies of req at once and returns the original answer (the one not
// replayed), after checking that the others replay it. ok is false if no copy was answered.
func (w *worker) concurrently(ctx context.Context, req request, copies int) (reply, bool) {
	replies := make([]reply, copies)
	errs := make([]error, copies)
	if copies == 1 {
		replies[0], errs[0] = w.settle(ctx, req)
	} else {
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() { replies[i], errs[i] = w.settle(ctx, req) })
		}
		wg.Wait()
	}
	var answered []reply
	for i, err := range errs {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				w.rec.errorf("%v", err)
			}
			continue
		}
		answered = append(answered, replies[i])
	}
	if len(answered) == 0 {
		return reply{}, false
	}
	return w.original(req, answered), true
}

// original picks the answer of the request that ran among answers to one key, and checks that
// every other one replays it. Without a crash exactly one ran; after one, the request that ran
// may have died unanswered, and all answers are replays.
func (w *worker) original(req request, answers []reply) reply {
	first := answers[0]
	originals := 0
	for _, a := range answers {
		if !a.replayed() {
			first = a
			originals++
		}
	}
	if w.cfg.Baseline {
		return first
	}
	if originals > 1 {
		w.rec.errorf("%v: %d answers without Idempotent-Replayed; want one", req, originals)
	}
	if originals == 0 && w.cfg.Patience == 0 {
		w.rec.errorf("%v: every answer is a replay, yet no request was lost", req)
	}
	for _, a := range answers {
		if a.replayed() {
			if diff := sameAnswer(first, a); diff != "" {
				w.rec.errorf("%v: a replay differs from the first answer: %s", req, diff)
			}
		}
	}
	return first
}

// deliver confirms payment as a provider's callbacks do: Deliveries times at once, about half
// with one key, the others each with its own. Every delivery must answer 200 paid; together
// they confirm the payment once.
func (w *worker) deliver(ctx context.Context, o *Order, path, payment string) bool {
	body := mustJSON(map[string]any{"amount": o.total()})
	p := path + "/payments/" + payment + "/confirm"
	n := w.cfg.Deliveries
	retried := (n + 1) / 2
	keys := make([]string, n)
	for i := range keys {
		keys[i] = payment + "-confirm"
		if i >= retried {
			keys[i] = fmt.Sprintf("%s-confirm-%d", payment, i)
		}
	}
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	confirm := func(key string) *Command {
		return &Command{Name: "confirm-payment", Method: http.MethodPost, Path: p, Key: key, Body: body, Delivery: true}
	}
	for i, key := range keys {
		wg.Go(func() { replies[i], errs[i] = w.settle(ctx, confirm(key).request()) })
	}
	wg.Wait()
	byKey := map[string][]reply{}
	var order []string
	for i, key := range keys {
		if errs[i] != nil {
			if !errors.Is(errs[i], context.Canceled) {
				w.rec.errorf("%v", errs[i])
			}
			continue
		}
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], replies[i])
	}
	o.Status, o.Paid = "paid", o.total()
	all := true
	for _, key := range keys {
		if _, ok := byKey[key]; !ok {
			o.unknown(confirm(key))
			all = false
		}
	}
	for _, key := range order {
		c := confirm(key)
		r := w.original(c.request(), byKey[key])
		w.acknowledge(o, c, r)
		if r.status != http.StatusOK {
			w.rec.errorf("%v: %v, want 200", c.request(), r)
			all = false
			continue
		}
		o.check(w, r)
	}
	return all && len(order) > 0
}

// acknowledge records c's first answer.
func (w *worker) acknowledge(o *Order, c *Command, r reply) {
	w.rec.ack()
	c.Status, c.Response = r.status, r.body
	c.Header = http.Header{}
	for _, h := range storedHeaders {
		if v := r.header.Get(h); v != "" {
			c.Header.Set(h, v)
		}
	}
	if r.status >= 300 {
		c.Effects = nil // refused: a stored refusal changed nothing
	}
	o.Commands = append(o.Commands, c)
}

// check compares an order in an answer with what the client expects.
func (o *Order) check(w *worker, r reply) {
	if w.cfg.Baseline {
		return
	}
	var got struct {
		Status string `json:"status"`
		Total  int64  `json:"total"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		w.rec.errorf("order %s: answer %v: %v", o.ID, r, err)
		return
	}
	if got.Status != o.Status || got.Total != o.total() {
		w.rec.errorf("order %s: answer %v; want status %s, total %d", o.ID, r, o.Status, o.total())
	}
}
