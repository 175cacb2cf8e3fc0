package load

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Ledger is what the clients were told: every order they created, every command acknowledged
// on it, and the state they expect the order in.
type Ledger struct {
	mu     sync.Mutex
	orders []*Order
}

func (l *Ledger) add(o *Order) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orders = append(l.orders, o)
}

// Orders returns the orders of the ledger.
func (l *Ledger) Orders() []*Order {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.orders)
}

// Commands returns every acknowledged command.
func (l *Ledger) Commands() []*Command {
	var cs []*Command
	for _, o := range l.Orders() {
		cs = append(cs, o.Commands...)
	}
	return cs
}

// Order is one order's lifecycle as its client saw it.
type Order struct {
	ID       string     // empty until the create is acknowledged
	Commands []*Command // acknowledged, in the order sent
	// Unknown are commands sent without an answer the client could use: each took effect
	// once or not at all. After one, the client stops driving the order.
	Unknown []*Command

	// The state the acknowledged commands leave the order in.
	Status         string
	Lines          map[string]Line
	Paid, Refunded int64
	uncertain      bool
}

// Line is an order line as the client expects it.
type Line struct {
	Quantity, UnitPrice int64
}

func (o *Order) total() int64 {
	var t int64
	for _, l := range o.Lines {
		t += l.Quantity * l.UnitPrice
	}
	return t
}

func (o *Order) unknown(c *Command) {
	o.Unknown = append(o.Unknown, c)
	o.uncertain = true
}

// Command is a keyed command and the first answer to it.
type Command struct {
	Name              string // such as "create-order"
	Method, Path, Key string
	Body              []byte
	// Effects are the types of the events the command appends, in order; none for a command
	// that changes nothing or was refused.
	Effects []string
	// Delivery marks one delivery of a payment confirmation: the deliveries of one payment
	// together append one payment-confirmed event, under any of their keys.
	Delivery bool

	Status   int
	Header   http.Header // the stored headers of the answer
	Response []byte
}

func (c *Command) request() request {
	return request{command: c.Name, method: c.Method, path: c.Path, key: c.Key, body: c.Body}
}

func (c *Command) reply() reply {
	return reply{status: c.Status, header: c.Header, body: c.Response}
}

// Report is the outcome of Verify.
type Report struct {
	Orders   int `json:"orders"`
	Events   int `json:"events"`
	Commands int `json:"commands"` // acknowledged
	Unknown  int `json:"unknown"`  // sent, never acknowledged: each may have taken effect once
	// Lost are acknowledged commands whose events are missing.
	Lost int `json:"lost"`
	// Duplicated are commands whose events are there more than once.
	Duplicated int `json:"duplicated"`
	// Mismatched are commands with other events than theirs, and orders whose state is not
	// what the acknowledged commands make it.
	Mismatched int `json:"mismatched"`
	// Phantoms are events of keys no client sent to the order, or with no key at all.
	Phantoms int      `json:"phantoms"`
	Problems []string `json:"problems,omitempty"` // the first ones, described
}

// OK reports whether the server kept every acknowledged command, once.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Mismatched == 0 && r.Phantoms == 0
}

func (r *Report) problem(counter *int, format string, args ...any) {
	*counter++
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// storedEvent is an entry of GET /v1/orders/{id}/events.
type storedEvent struct {
	Type     string `json:"type"`
	Metadata struct {
		IdempotencyKey string `json:"idempotencyKey"`
	} `json:"metadata"`
}

// Verify reads every order of the ledger back from the server, its events and its state, and
// checks them against the ledger: each acknowledged command's events are in its order exactly
// once, unacknowledged ones at most once, no other events, one order.created.v2, at most one
// order.payment-confirmed.v1, and the order's state is the one the client expects.
func Verify(ctx context.Context, cfg Config, l *Ledger) (Report, error) {
	cfg.defaults()
	cfg.Patience = max(cfg.Patience, 10*time.Second)
	orders := l.Orders()
	var (
		mu  sync.Mutex
		rep Report
	)
	work := make(chan *Order)
	var wg sync.WaitGroup
	w := &worker{cfg: &cfg, client: &http.Client{Transport: cfg.Transport}, rec: &recorder{}}
	for range cfg.Clients {
		wg.Go(func() {
			for o := range work {
				var r Report
				err := r.order(ctx, w, o)
				mu.Lock()
				rep.merge(r)
				if err != nil {
					rep.problem(&rep.Mismatched, "order %s: %v", o.ID, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, o := range orders {
		select {
		case work <- o:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return rep, ctx.Err()
}

func (r *Report) merge(o Report) {
	r.Orders += o.Orders
	r.Events += o.Events
	r.Commands += o.Commands
	r.Unknown += o.Unknown
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Mismatched += o.Mismatched
	r.Phantoms += o.Phantoms
	for _, p := range o.Problems {
		if len(r.Problems) < 50 {
			r.Problems = append(r.Problems, p)
		}
	}
}

// order checks one order into r.
func (r *Report) order(ctx context.Context, w *worker, o *Order) error {
	r.Commands += len(o.Commands)
	r.Unknown += len(o.Unknown)
	if o.ID == "" {
		return nil // the create was never acknowledged: nothing to find it by
	}
	r.Orders++
	events, err := orderEvents(ctx, w, o.ID)
	if err != nil {
		return err
	}
	r.Events += len(events)
	r.effects(o, events)
	if o.uncertain {
		return nil // an unanswered command may have changed it
	}
	return r.state(ctx, w, o, len(events))
}

// orderEvents reads the events of order id.
func orderEvents(ctx context.Context, w *worker, id string) ([]storedEvent, error) {
	res, err := w.settle(ctx, request{command: "get-history", method: http.MethodGet, path: "/v1/orders/" + id + "/events"})
	if err != nil {
		return nil, err
	}
	if res.status != http.StatusOK {
		return nil, fmt.Errorf("events: %v", res)
	}
	var body struct {
		Events []storedEvent `json:"events"`
	}
	if err := json.Unmarshal(res.body, &body); err != nil {
		return nil, fmt.Errorf("events: %v", err)
	}
	return body.Events, nil
}

// effects checks the order's events against its commands: each acknowledged command's events
// once under its key, an unanswered one's once or not at all, one payment confirmation among
// the deliveries' keys, no event under a key no client sent, one create.
func (r *Report) effects(o *Order, events []storedEvent) {
	byKey := map[string][]string{}
	counts := map[string]int{}
	for _, e := range events {
		byKey[e.Metadata.IdempotencyKey] = append(byKey[e.Metadata.IdempotencyKey], e.Type)
		counts[e.Type]++
	}
	sent, deliveries, delivered := r.commandEffects(o, byKey)
	switch {
	case delivered && len(deliveries) == 0:
		r.problem(&r.Lost, "order %s: the payment was confirmed 200, but no delivery's key has an event", o.ID)
	case len(deliveries) > 1:
		r.problem(&r.Duplicated, "order %s: the payment deliveries appended %v, want one %s", o.ID, deliveries, evPaymentConfirmed)
	case len(deliveries) == 1 && deliveries[0] != evPaymentConfirmed:
		r.problem(&r.Mismatched, "order %s: the payment deliveries appended %v, want one %s", o.ID, deliveries, evPaymentConfirmed)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if !sent[key] {
			r.problem(&r.Phantoms, "order %s: events %v of key %q, which no client sent to it", o.ID, byKey[key], key)
		}
	}
	if counts[evCreated] != 1 {
		r.problem(&r.Duplicated, "order %s: %d %s events", o.ID, counts[evCreated], evCreated)
	}
	if counts[evPaymentConfirmed] > 1 {
		r.problem(&r.Duplicated, "order %s: %d %s events", o.ID, counts[evPaymentConfirmed], evPaymentConfirmed)
	}
}

// commandEffects checks each command's events under its key (byKey); it returns the keys
// sent, the events under the payment deliveries' keys, and whether a delivery was answered 200.
func (r *Report) commandEffects(o *Order, byKey map[string][]string) (sent map[string]bool, deliveries []string, delivered bool) {
	sent = map[string]bool{}
	delivery := func(c *Command) {
		if !sent[c.Key] {
			deliveries = append(deliveries, byKey[c.Key]...)
		}
		sent[c.Key] = true
	}
	for _, c := range o.Commands {
		got := byKey[c.Key]
		if c.Delivery {
			delivery(c)
			delivered = delivered || c.Status == http.StatusOK
			continue
		}
		sent[c.Key] = true
		switch {
		case slices.Equal(got, c.Effects):
		case len(got) == 0:
			r.problem(&r.Lost, "order %s: %s (key %s) was acknowledged %d, but none of its events %v is there", o.ID, c.Name, c.Key, c.Status, c.Effects)
		case repeats(got, c.Effects):
			r.problem(&r.Duplicated, "order %s: %s (key %s) took effect %d times: %v", o.ID, c.Name, c.Key, len(got)/len(c.Effects), got)
		default:
			r.problem(&r.Mismatched, "order %s: %s (key %s) has events %v, want %v", o.ID, c.Name, c.Key, got, c.Effects)
		}
	}
	for _, c := range o.Unknown {
		if c.Delivery {
			delivery(c)
			continue
		}
		sent[c.Key] = true
		if got := byKey[c.Key]; len(got) > 0 && !slices.Equal(got, c.Effects) {
			r.problem(&r.Duplicated, "order %s: unanswered %s (key %s) has events %v, want none or %v", o.ID, c.Name, c.Key, got, c.Effects)
		}
	}
	return sent, deliveries, delivered
}

// state checks the order as the API shows it against the ledger's, and its version against
// its events.
func (r *Report) state(ctx context.Context, w *worker, o *Order, events int) error {
	res, err := w.settle(ctx, request{command: "get-order", method: http.MethodGet, path: "/v1/orders/" + o.ID})
	if err != nil {
		return err
	}
	var got struct {
		Status   string     `json:"status"`
		Lines    []lineBody `json:"lines"`
		Total    int64      `json:"total"`
		Paid     int64      `json:"paid"`
		Refunded int64      `json:"refunded"`
		Version  int        `json:"version"`
	}
	if res.status != http.StatusOK {
		return fmt.Errorf("get: %v", res)
	}
	if err := json.Unmarshal(res.body, &got); err != nil {
		return fmt.Errorf("get: %v", err)
	}
	lines := map[string]Line{}
	for _, l := range got.Lines {
		lines[l.SKU] = Line{Quantity: l.Quantity, UnitPrice: l.UnitPrice}
	}
	var diffs []string
	if got.Status != o.Status {
		diffs = append(diffs, fmt.Sprintf("status %s, want %s", got.Status, o.Status))
	}
	if !maps.Equal(lines, o.Lines) {
		diffs = append(diffs, fmt.Sprintf("lines %v, want %v", lines, o.Lines))
	}
	if got.Total != o.total() || got.Paid != o.Paid || got.Refunded != o.Refunded {
		diffs = append(diffs, fmt.Sprintf("total/paid/refunded %d/%d/%d, want %d/%d/%d", got.Total, got.Paid, got.Refunded, o.total(), o.Paid, o.Refunded))
	}
	if got.Version != events {
		diffs = append(diffs, fmt.Sprintf("version %d, but %d events", got.Version, events))
	}
	if len(diffs) > 0 {
		r.problem(&r.Mismatched, "order %s: %s", o.ID, strings.Join(diffs, "; "))
	}
	return nil
}

// repeats reports whether got is want, more than once over.
func repeats(got, want []string) bool {
	if len(want) == 0 || len(got) <= len(want) || len(got)%len(want) != 0 {
		return false
	}
	for i := range got {
		if got[i] != want[i%len(want)] {
			return false
		}
	}
	return true
}

// Replay sends every acknowledged command of the ledger again, from Clients clients, and
// checks that each answer replays the first one (unless cfg.Baseline). Mismatches are errors
// in the stats, with samples.
func Replay(ctx context.Context, cfg Config, l *Ledger) (Stats, error) {
	cfg.defaults()
	client := &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	work := make(chan *Command)
	recs := make([]*recorder, cfg.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Clients {
		recs[i] = &recorder{}
		w := &worker{cfg: &cfg, client: client, rec: recs[i]}
		wg.Go(func() {
			for c := range work {
				r, err := w.settle(ctx, c.request())
				if err != nil {
					w.rec.errorf("replay: %v", err)
					continue
				}
				w.rec.ack()
				if cfg.Baseline {
					continue
				}
				if diff := sameAnswer(c.reply(), r); diff != "" {
					w.rec.errorf("replay of %v: %s", c.request(), diff)
				}
			}
		})
	}
	for _, c := range l.Commands() {
		select {
		case work <- c:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return stats(recs, start, time.Now()), ctx.Err()
}
