package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/acme/orders/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsRig is a NATS server in the test's process, a client of it, and the nodes' flags.
type natsRig struct {
	ns *natstest.Server
	nc *nats.Conn
	js jetstream.JetStream

	mu      sync.Mutex
	replies map[string][]*nats.Msg // by the key of the command each answers
	at      map[string]time.Time   // when a key's first reply came
	seen    map[string]time.Time   // when an order's first event came
}

func newNatsRig(t *testing.T) *natsRig {
	t.Helper()
	r := &natsRig{ns: natstest.Start(t), replies: map[string][]*nats.Msg{}, at: map[string]time.Time{}, seen: map[string]time.Time{}}
	var err error
	if r.nc, err = nats.Connect(r.ns.URL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	if r.js, err = jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(512)); err != nil {
		t.Fatal(err)
	}
	sub, err := r.nc.Subscribe("_INBOX.test.>", func(m *nats.Msg) {
		key := strings.TrimPrefix(m.Subject, "_INBOX.test.")
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.replies[key]) == 0 {
			r.at[key] = time.Now()
		}
		r.replies[key] = append(r.replies[key], m)
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	events, err := r.nc.Subscribe("orders.events.>", func(m *nats.Msg) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if order := strings.TrimPrefix(m.Subject, "orders.events."); r.seen[order].IsZero() {
			r.seen[order] = time.Now()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	events.SetPendingLimits(-1, -1)
	return r
}

// publishLag is, for each order of orders (order id → key), the time from its create's first
// reply to its first event's arrival: the events' publication lag as a consumer sees it.
func (r *natsRig) publishLag(orders map[string]string) (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lags []time.Duration
	for order, key := range orders {
		if seen, ok := r.seen[order]; ok {
			lags = append(lags, max(seen.Sub(r.at[key]), 0))
		}
	}
	if len(lags) == 0 {
		return 0, 0
	}
	slices.Sort(lags)
	return lags[len(lags)/2], lags[len(lags)*99/100]
}

// flags are a node's flags for the rig: the intake of orders.cmd.> as the development principal.
func (r *natsRig) flags(t *testing.T) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "intake.json")
	intake := `{"intake":[{"stream":"ORDERS_COMMANDS","consumer":"orders","subject":"orders.cmd.>","principal":"local"}]}`
	if err := os.WriteFile(file, []byte(intake), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--nats-url", r.ns.URL(), "--nats-intake", file, "--nats-ack-wait", "3s", "--nats-lease", "2s"}
}

// publish publishes the command of key to subject, without Nats-Msg-Id: JetStream stores each
// copy, as a redelivering publisher would have it.
func (r *natsRig) publish(t *testing.T, subject, key string, body []byte) {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{"Idempotency-Key": {key}, "Reply-To": {"_INBOX.test." + key}}}
	if _, err := r.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
		t.Error(err) // on the publishing goroutine: Fatal must not be called there
	}
}

func (r *natsRig) answered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.replies)
}

// settled reports whether the intake's consumer has nothing left to deliver or settle.
func (r *natsRig) settled(t *testing.T) bool {
	c, err := r.js.Consumer(t.Context(), "ORDERS_COMMANDS", "orders")
	if err != nil {
		return false
	}
	info, err := c.Info(t.Context())
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
}

// streamEvents reads every message of the events stream, in order.
func (r *natsRig) streamEvents(t *testing.T) []jetstream.Msg {
	t.Helper()
	cons, err := r.js.OrderedConsumer(t.Context(), "ORDERS_EVENTS", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			out, n = append(out, m), n+1
		}
		if n == 0 {
			return out
		}
	}
}

// Creates published to NATS, 30 % of them two or three times with the same key, consumed by
// three nodes on one PostgreSQL through one durable consumer, while the node that publishes the
// events is SIGKILLed twice and started again: every key has one order, every reply of a key is
// the same, the audit verifier finds the log sound, and every event of the log is on the events
// stream, in order per order, repeated only with its id.
func TestNatsCommandsAndEventsThroughKills(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t).NewDatabase(t)
	r := newNatsRig(t)
	args := append([]string{"--store", "postgres", "--postgres-url", url, "--key-lease", "1s", "--key-wait", "500ms"}, r.flags(t)...)
	nodes := startNodes(t, args)
	n := 10000 // about 30 s with -race on two cores
	copies := map[string]int{}
	var sends []string
	for i := range n {
		key := fmt.Sprintf("nats-%d", i)
		copies[key] = 1
		if rand.IntN(10) < 3 {
			copies[key] += 1 + rand.IntN(2)
		}
		for range copies[key] {
			sends = append(sends, key)
		}
	}
	rand.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })
	start := time.Now()
	var published sync.WaitGroup
	published.Go(func() {
		for _, key := range sends {
			r.publish(t, "orders.cmd.create", key, natsCreate(key))
		}
	})
	for kill := 1; kill <= 2; kill++ {
		waitFor(t, 2*time.Minute, "answers before a kill", func() bool { return r.answered() >= kill*n/3 })
		victim := publishingNode(nodes)
		victim.kill(t)
		t.Logf("killed the publishing node after %d of %d keys answered", r.answered(), n)
		victim.start(t)
	}
	published.Wait()
	waitFor(t, 3*time.Minute, "every key answered and every message settled", func() bool { return r.answered() == n && r.settled(t) })
	took := time.Since(start)
	t.Logf("%d keys (%d messages) through 3 nodes and 2 kills in %v: %.0f messages/s", n, len(sends), took, float64(len(sends))/took.Seconds())
	orders := checkReplies(t, r, copies)
	checkEventsOut(t, r, url, orders)
	p50, p99 := r.publishLag(orders)
	t.Logf("publish lag, from a create's reply to its first event on NATS: p50 %v, p99 %v", p50, p99)
	if out, code := runAPI(t, "audit", "verify", "--store", "postgres", "--postgres-url", url, "--data", nodes[0].dir); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, tail(out, 8<<10))
	}
}

func natsCreate(key string) []byte {
	body, _ := json.Marshal(orderFor("c-" + key))
	return body
}

// publishingNode is the node whose running process took the publisher's lease last.
func publishingNode(nodes []*server) *server {
	for _, s := range nodes {
		if strings.Contains(s.current().stderr.String(), "nats publisher lease acquired") {
			return s
		}
	}
	return nodes[0]
}

// checkReplies checks that every key's replies are one answer, a 201 of the key's own order,
// and returns the keys by order id.
func checkReplies(t *testing.T, r *natsRig, copies map[string]int) map[string]string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	orders := map[string]string{}
	for key := range copies {
		replies := r.replies[key]
		if len(replies) == 0 {
			t.Errorf("%s: no reply", key)
			continue
		}
		first := replies[0]
		var o struct{ ID, CustomerID string }
		if err := json.Unmarshal(first.Data, &o); err != nil || first.Header.Get("Status-Code") != "201" || o.CustomerID != "c-"+key {
			t.Errorf("%s: %v %s; want 201 with its order", key, first.Header, first.Data)
			continue
		}
		for _, m := range replies[1:] {
			if m.Header.Get("Status-Code") != "201" || !bytes.Equal(m.Data, first.Data) {
				t.Errorf("%s: replies differ: %s / %s", key, first.Data, m.Data)
			}
		}
		if other, dup := orders[o.ID]; dup {
			t.Errorf("keys %s and %s have one order %s", other, key, o.ID)
		}
		orders[o.ID] = key
	}
	return orders
}

// checkEventsOut checks the events stream against the log: every order event on it, in order
// per order; an event repeated only with its id and data; and one order created per key.
func checkEventsOut(t *testing.T, r *natsRig, url string, orders map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	store, err := postgres.Open(ctx, url, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	want := map[string][]string{} // order id → its event ids in log order
	total := 0
	for e, err := range store.ReadAll(ctx, eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{"order-"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimPrefix(e.Stream, "order-")
		if _, ok := orders[id]; !ok {
			t.Errorf("order %s is no key's", id)
		}
		want[id] = append(want[id], e.ID.String())
		total++
	}
	if len(want) != len(orders) {
		t.Errorf("%d orders in the log; %d keys", len(want), len(orders))
	}
	var msgs []jetstream.Msg
	waitFor(t, time.Minute, "every event on the stream", func() bool { msgs = r.streamEvents(t); return len(msgs) >= total })
	got, data := map[string][]string{}, map[string][]byte{}
	for _, m := range msgs {
		id, order := m.Headers().Get("Nats-Msg-Id"), strings.TrimPrefix(m.Subject(), "orders.events.")
		if d, seen := data[id]; seen {
			if !bytes.Equal(d, m.Data()) {
				t.Errorf("event %s published twice with other data", id)
			}
			continue
		}
		data[id] = m.Data()
		got[order] = append(got[order], id)
	}
	for order, ids := range want {
		if !slices.Equal(got[order], ids) {
			t.Errorf("order %s: events on the stream %v; the log has %v", order, got[order], ids)
		}
	}
	t.Logf("%d events in the log, %d messages on the stream (%d repeated)", total, len(msgs), len(msgs)-len(data))
}

// The same keyed creates on one node of the embedded store, first through NATS (published at
// once, answered by reply), then over HTTP (32 clients): both rates, and the events' publication
// lag under the NATS load, are logged for docs/benchmarks.md.
func TestNatsAgainstHTTP(t *testing.T) {
	t.Parallel()
	r := newNatsRig(t)
	s := startServer(t, "", r.flags(t)...)
	n := soakSize(1000, 10000)
	start := time.Now()
	for i := range n {
		key := fmt.Sprintf("rate-%d", i)
		r.publish(t, "orders.cmd.create", key, natsCreate(key))
	}
	waitFor(t, 3*time.Minute, "every command answered", func() bool { return r.answered() == n })
	viaNats := time.Since(start)
	orders := map[string]string{}
	r.mu.Lock()
	for key, replies := range r.replies {
		var o struct{ ID string }
		if json.Unmarshal(replies[0].Data, &o) != nil || replies[0].Header.Get("Status-Code") != "201" {
			t.Fatalf("%s: %v %s", key, replies[0].Header, replies[0].Data)
		}
		orders[o.ID] = key
	}
	r.mu.Unlock()
	waitFor(t, time.Minute, "every order's first event", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.seen) >= n
	})
	// A plain client, as NATS's is: the tests' own checks every answer against the contract.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	start = time.Now()
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Go(func() {
			for i := c; i < n; i += 32 {
				key := fmt.Sprintf("http-%d", i)
				req, _ := http.NewRequest("POST", s.base+"/v1/orders", bytes.NewReader(natsCreate(key)))
				req.Header = http.Header{"Idempotency-Key": {key}, "Content-Type": {"application/json"}}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("%s: %s", key, resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	viaHTTP := time.Since(start)
	p50, p99 := r.publishLag(orders)
	t.Logf("%d creates: NATS %.0f/s (%v), HTTP with 32 clients %.0f/s (%v); publish lag under the NATS load p50 %v, p99 %v",
		n, float64(n)/viaNats.Seconds(), viaNats.Round(time.Millisecond), float64(n)/viaHTTP.Seconds(), viaHTTP.Round(time.Millisecond), p50, p99)
}

// While NATS is away the HTTP API takes commands and /readyz stays 200, naming the connection's
// state; once NATS is back the node reconnects by itself and takes commands from it again. A
// consumer added to the intake file is consumed after SIGHUP.
func TestNatsOutageAndIntakeReload(t *testing.T) {
	t.Parallel()
	r := newNatsRig(t)
	flags := r.flags(t)
	s := startServer(t, "", flags...)
	ready := func(state string) bool {
		res, err := s.send(t, request{method: "GET", path: "/readyz"})
		return err == nil && res.status == http.StatusOK && res.str("nats") == state
	}
	waitFor(t, 10*time.Second, "readiness naming NATS connected", func() bool { return ready("connected") })
	r.ns.Stop()
	waitFor(t, 10*time.Second, "readiness naming NATS reconnecting, still 200", func() bool { return ready("reconnecting") })
	s.create(t, "during-the-outage", "c-outage")
	r.ns.Start(t)
	waitFor(t, 30*time.Second, "readiness naming NATS connected again", func() bool { return ready("connected") })
	r.publish(t, "orders.cmd.create", "after-the-outage", natsCreate("after-the-outage"))
	waitFor(t, 30*time.Second, "the command after the outage answered", func() bool { return r.answered() == 1 })

	intake := flags[slices.Index(flags, "--nats-intake")+1]
	two := `{"intake":[{"stream":"ORDERS_COMMANDS","consumer":"orders","subject":"orders.cmd.>","principal":"local"},
		{"stream":"SHOP_COMMANDS","consumer":"shop","subject":"shop.cmd.>","principal":"local"}]}`
	if err := os.WriteFile(intake, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	s.signal(t, syscall.SIGHUP)
	waitFor(t, 10*time.Second, "the stream of the new consumer", func() bool {
		_, err := r.js.Stream(t.Context(), "SHOP_COMMANDS")
		return err == nil
	})
	r.publish(t, "shop.cmd.create", "through-the-new-consumer", natsCreate("through-the-new-consumer"))
	waitFor(t, 30*time.Second, "the command of the new consumer answered", func() bool { return r.answered() == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, replies := range r.replies {
		if replies[0].Header.Get("Status-Code") != "201" {
			t.Errorf("%s: %v %s", key, replies[0].Header, replies[0].Data)
		}
	}
}
