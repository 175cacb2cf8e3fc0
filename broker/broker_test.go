package broker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/api"
	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/internal/natstest"
	"github.com/acme/orders/internal/syncbuf"
	"github.com/acme/orders/lease"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rig is a NATS server with JetStream, a connection to it, and the API on an embedded store.
type rig struct {
	nats  *natstest.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	store *sqlite.Store
	srv   *api.Server
	log   *slog.Logger
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ns := natstest.Start(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	srv := &api.Server{Store: store, Feed: store, Orders: &command.Handler{Store: store}, Keys: &idempotency.Keys{Store: store, Log: log},
		IDs: command.NewOrderIDs(), Log: log}
	srv.Handler()
	return &rig{nats: ns, nc: nc, js: js, store: store, srv: srv, log: log}
}

var testStreams = Streams{MaxAge: time.Hour, MaxBytes: 64 << 20, Duplicates: time.Minute}

// intake consumes orders.cmd.> of stream CMD as the development principal.
func (r *rig) intake(t *testing.T) *Intake {
	t.Helper()
	in := &Intake{JS: r.js, Dispatcher: r.srv, Streams: testStreams, DeadLetters: "orders.deadletter",
		AckWait: 5 * time.Second, MaxAckPending: 16, Metrics: NewMetrics(prometheus.NewRegistry()), Log: r.log}
	if err := testStreams.Ensure(t.Context(), r.js, "DEAD", "orders.deadletter.>"); err != nil {
		t.Fatal(err)
	}
	entries, err := ParseIntake([]byte(`{"intake":[{"stream":"CMD","consumer":"orders","subject":"orders.cmd.>","principal":"local"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Apply(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Stop)
	return in
}

// send publishes a command to the stream and returns its reply.
func (r *rig) send(t *testing.T, subject, key, body string) *nats.Msg {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	m := &nats.Msg{Subject: subject, Header: nats.Header{ReplyTo: {inbox}}, Data: []byte(body)}
	if key != "" {
		m.Header.Set("Idempotency-Key", key)
	}
	if _, err := r.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	reply, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("%s %s: no reply: %v", subject, key, err)
	}
	return reply
}

const create = `{"customerId":"c-1","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPrice":100}]}`

// A command sent twice with one key is applied once; both replies are its answer, the second
// replayed; the HTTP request of the same key replays it too.
func TestIntakeAppliesOnce(t *testing.T) {
	r := newRig(t)
	if err := testStreams.Ensure(t.Context(), r.js, "CMD", "orders.cmd.>"); err != nil {
		t.Fatal(err)
	}
	r.intake(t)
	first := r.send(t, "orders.cmd.create", "k-1", create)
	again := r.send(t, "orders.cmd.create", "k-1", create)
	if first.Header.Get(StatusCode) != "201" || string(first.Data) != string(again.Data) || again.Header.Get(StatusCode) != "201" {
		t.Fatalf("replies: %v %s / %v %s; want the same 201 twice", first.Header, first.Data, again.Header, again.Data)
	}
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the second reply is not replayed: %v", again.Header)
	}
	id := strings.TrimPrefix(first.Header.Get("Location"), "/v1/orders/")
	paying := r.send(t, "orders.cmd."+id+".payments", "k-2", `{"paymentId":"p-1","amount":100}`)
	if paying.Header.Get(StatusCode) != "200" || !strings.Contains(string(paying.Data), `"status":"paying"`) {
		t.Errorf("start payment: %v %s", paying.Header, paying.Data)
	}
	status, h, body := r.srv.Dispatch(t.Context(), (Entry{Principal: "local", roles: 1}).Caller(), http.MethodPost, "/v1/orders",
		http.Header{"Idempotency-Key": {"k-1"}, "Content-Type": {"application/json"}}, []byte(create))
	if status != 201 || h.Get("Idempotent-Replayed") != "true" || string(body) != string(first.Data) {
		t.Errorf("the key over HTTP: %d %v %s", status, h, body)
	}
}

// Messages that can never succeed end in the dead-letter subject once each, with their
// problem, and the consumer goes on: a good message after them is applied.
func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	r := newRig(t)
	if err := testStreams.Ensure(t.Context(), r.js, "CMD", "orders.cmd.>"); err != nil {
		t.Fatal(err)
	}
	in := r.intake(t)
	created := r.send(t, "orders.cmd.create", "k-0", create)
	id := strings.TrimPrefix(created.Header.Get("Location"), "/v1/orders/")
	poison := []struct{ subject, key, body, problem string }{
		{"orders.cmd.create", "k-1", `{"customerId":`, "malformed-request"},
		{"orders.cmd.nothing.here", "k-2", `{}`, "not-found"},
		{"orders.cmd.create", "", create, "idempotency-key-missing"},
		{"orders.cmd.create", "k-0", `{"customerId":"c-2","currency":"EUR"}`, "idempotency-key-reused"},
		{"orders.cmd." + id + ".shipments", "k-3", `{"carrier":"dhl","trackingNumber":"t-1"}`, "invalid-transition"},
	}
	for _, p := range poison {
		reply := r.send(t, p.subject, p.key, p.body)
		if !strings.Contains(string(reply.Data), "/problems/"+p.problem) {
			t.Errorf("%s %s: %s; want %s", p.subject, p.key, reply.Data, p.problem)
		}
	}
	good := r.send(t, "orders.cmd."+id+".cancel", "k-4", `{"reason":"changed my mind"}`)
	if good.Header.Get(StatusCode) != "200" {
		t.Errorf("the good message after them: %v %s", good.Header, good.Data)
	}
	cons, err := r.js.OrderedConsumer(t.Context(), "DEAD", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		if m.Headers().Get(originalSubject) == "" || !strings.HasPrefix(m.Subject(), "orders.deadletter.orders.cmd.") {
			t.Errorf("dead letter %s: %v", m.Subject(), m.Headers())
		}
		got = append(got, problemType(m.Data()))
	}
	if len(got) != len(poison) {
		t.Fatalf("dead letters: %v; want one for each of the %d poison messages", got, len(poison))
	}
	for i, p := range poison {
		if got[i] != "/problems/"+p.problem {
			t.Errorf("dead letter %d: %s; want %s", i, got[i], p.problem)
		}
	}
	if n := testutil.ToFloat64(in.Metrics.deadLetters.WithLabelValues("orders")); n != float64(len(poison)) {
		t.Errorf("orders_nats_dead_letters_total: %v", n)
	}
}

// The publisher publishes every order event once, in log order, with its id; a second node
// takes over from the checkpoint once the first stops, and nothing is missing.
func TestPublisherTakeOver(t *testing.T) {
	r := newRig(t)
	r.createN(t, 0, 20)
	if err := testStreams.Ensure(t.Context(), r.js, "EVENTS", "orders.events.>"); err != nil {
		t.Fatal(err)
	}
	stop := r.publisher(t, "node-a", r.js, NewMetrics(prometheus.NewRegistry()), r.log)
	waitForEvents(t, r, 40)
	stop()
	r.createN(t, 20, 10)
	stopB := r.publisher(t, "node-b", r.js, NewMetrics(prometheus.NewRegistry()), r.log)
	defer stopB()
	r.publishedOnceInOrder(t, waitForEvents(t, r, 60))
}

// A publisher paused in the middle of a batch for longer than its lease (a stalled process)
// loses the lease to another node, which publishes from the checkpoint. Once resumed, the
// first publishes the rest of the batch it was sending, no more: its next checkpoint is
// refused and it stops. JetStream stores each event once, in log order.
func TestPublisherPausedMidBatchLosesTheLease(t *testing.T) {
	r := newRig(t)
	r.createN(t, 0, 20)
	if err := testStreams.Ensure(t.Context(), r.js, "EVENTS", "orders.events.>"); err != nil {
		t.Fatal(err)
	}
	gate := &gatedJetStream{JetStream: r.js, open: make(chan struct{})}
	close(gate.open)
	metricsA := NewMetrics(prometheus.NewRegistry())
	logA := &syncbuf.Buffer{}
	stopA := r.publisher(t, "node-a", gate, metricsA, slog.New(slog.NewTextHandler(logA, nil)))
	defer stopA()
	waitForEvents(t, r, 40)

	gate.close()
	r.createN(t, 20, 5)
	waitFor(t, "node-a to block in the middle of a batch", func() bool { return gate.waiting.Load() > 0 })
	atPause := testutil.ToFloat64(metricsA.published)
	stopB := r.publisher(t, "node-b", r.js, NewMetrics(prometheus.NewRegistry()), r.log)
	defer stopB()
	waitForEvents(t, r, 50) // node-b took over once node-a's lease ran out, and published the rest

	close(gate.open)
	waitFor(t, "node-a to lose its lease", func() bool { return strings.Contains(logA.String(), lease.ErrLost.Error()) })
	resumed := testutil.ToFloat64(metricsA.published) - atPause
	if resumed < 1 || resumed > 8 {
		t.Errorf("node-a published %v events once resumed; want the rest of its batch, 1 to 8", resumed)
	}
	r.createN(t, 25, 5)
	r.publishedOnceInOrder(t, waitForEvents(t, r, 60))
	if n := testutil.ToFloat64(metricsA.published) - atPause; n != resumed {
		t.Errorf("node-a published %v events after it lost the lease; want none", n-resumed)
	}
}

// createN creates n orders, keys from to from+n-1.
func (r *rig) createN(t *testing.T, from, n int) {
	t.Helper()
	caller := (Entry{Principal: "local", roles: 1}).Caller()
	for i := from; i < from+n; i++ {
		status, _, body := r.srv.Dispatch(t.Context(), caller, http.MethodPost, "/v1/orders",
			http.Header{"Idempotency-Key": {"k-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)}, "Content-Type": {"application/json"}}, []byte(create))
		if status != 201 {
			t.Fatalf("create: %d %s", status, body)
		}
	}
}

// publisher runs a publisher to the EVENTS stream as node through js, until stop.
func (r *rig) publisher(t *testing.T, node string, js jetstream.JetStream, m *Metrics, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	p := &Publisher{JS: js, Store: r.store, Feed: r.store, Prefix: "orders.events", Stream: "EVENTS", Streams: testStreams, Batch: 8,
		Lease: lease.Terms{Length: time.Second, Node: node}, Metrics: m, Log: log}
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	return func() { cancel(); wg.Wait() }
}

// publishedOnceInOrder checks that the messages got are the events of the orders' streams, in
// log order, each once, with its id, type and subject.
func (r *rig) publishedOnceInOrder(t *testing.T, got []*nats.Msg) {
	t.Helper()
	var want []eventstore.RecordedEvent
	for e, err := range r.store.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{"order-"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events published; the log has %d", len(got), len(want))
	}
	for i, e := range want {
		if got[i].Header.Get(jetstream.MsgIDHeader) != e.ID.String() || got[i].Header.Get(EventType) != e.Type || got[i].Subject != "orders.events."+strings.TrimPrefix(e.Stream, "order-") {
			t.Errorf("event %d: %s %v; want %s %s", i, got[i].Subject, got[i].Header, e.ID, e.Type)
		}
	}
}

// gatedJetStream holds every publish while its gate is closed, as a stalled process would.
type gatedJetStream struct {
	jetstream.JetStream
	mu      sync.Mutex
	open    chan struct{} // closed while publishes pass
	waiting atomic.Int32  // publishes held at the gate
}

func (g *gatedJetStream) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gatedJetStream) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	g.waiting.Add(1)
	<-open
	g.waiting.Add(-1)
	return g.JetStream.PublishMsgAsync(m, opts...)
}

// waitFor waits up to 20 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForEvents waits until the EVENTS stream holds n messages and returns them.
func waitForEvents(t *testing.T, r *rig, n int) []*nats.Msg {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := r.js.Stream(t.Context(), "EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= uint64(n) {
			var out []*nats.Msg
			for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(t.Context(), seq)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events on the stream; want %d", info.State.Msgs, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An intake file that cannot be used names the entry and the field at fault.
func TestParseIntakeErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"intake":[]}`, "0 entries"},
		{`{"intake":[{"stream":"S","consumer":"c","subject":"orders.cmd","principal":"p"}]}`, `entry 0 (consumer "c"): subject`},
		{`{"intake":[{"stream":"S","consumer":"c.d","subject":"orders.cmd.>","principal":"p"}]}`, "consumer"},
		{`{"intake":[{"stream":"S","consumer":"c","subject":"orders.cmd.>","principal":""}]}`, "principal"},
		{`{"intake":[{"stream":"S","consumer":"c","subject":"orders.cmd.>","principal":"p","roles":"boss"}]}`, "roles"},
		{`{"intake":[{"stream":"S","consumer":"c","subject":"a.>","principal":"p"},{"stream":"S","consumer":"c","subject":"b.>","principal":"p"}]}`, "entry 1"},
		{`{"intake":[{"stream":"S","consumer":"c","subject":"a.>","principal":"p","extra":1}]}`, "extra"},
	} {
		if _, err := ParseIntake([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.file, err, tc.want)
		}
	}
}

func TestRoute(t *testing.T) {
	for subject, want := range map[string]string{
		"orders.cmd.create":                        "POST /v1/orders",
		"orders.cmd.payments.p-1.confirm":          "POST /v1/payments/p-1/confirm",
		"orders.cmd.ID.lines":                      "POST /v1/orders/ID/lines",
		"orders.cmd.ID.lines.sku%1.put":            "PUT /v1/orders/ID/lines/sku%251",
		"orders.cmd.ID.lines.delete.delete":        "DELETE /v1/orders/ID/lines/delete",
		"orders.cmd.ID.payments.p-1.confirm":       "POST /v1/orders/ID/payments/p-1/confirm",
		"orders.cmd.ID.refunds.r-1.complete":       "POST /v1/orders/ID/refunds/r-1/complete",
		"orders.cmd.ID.cancel":                     "POST /v1/orders/ID/cancel",
		"orders.cmd.nothing":                       "POST /v1/orders/nothing",
		"orders.cmd.ID.payments.p-1.fail":          "POST /v1/orders/ID/payments/p-1/fail",
		"orders.cmd.ID.shipments":                  "POST /v1/orders/ID/shipments",
		"orders.cmd.ID.refunds":                    "POST /v1/orders/ID/refunds",
		"orders.cmd.ID.payments":                   "POST /v1/orders/ID/payments",
		"orders.cmd.ID.lines.a b.delete":           "DELETE /v1/orders/ID/lines/a%20b",
		"orders.cmd.ID.lines.sku-1.delete.extra.x": "POST /v1/orders/ID/lines/sku-1/delete/extra/x",
	} {
		method, path := Route("orders.cmd", subject)
		if got := method + " " + path; got != want {
			t.Errorf("%s: %s; want %s", subject, got, want)
		}
	}
}

// answers is a Dispatcher that answers from a list, then 201, counting its calls.
type answers struct {
	mu    sync.Mutex
	list  []int
	calls int
}

func (a *answers) Dispatch(context.Context, access.Caller, string, string, http.Header, []byte) (int, http.Header, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if len(a.list) == 0 {
		return http.StatusCreated, http.Header{"Content-Type": {"application/json"}}, []byte("{}\n")
	}
	status := a.list[0]
	a.list = a.list[1:]
	h := http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"1"}}
	return status, h, []byte(`{"type":"/problems/x"}` + "\n")
}

// A key in flight elsewhere (409 with Retry-After) and an unavailable store (503) are
// delivered again, after a wait, until the command's answer is final; nothing is dead-lettered.
func TestPassingRefusalsAreRedelivered(t *testing.T) {
	r := newRig(t)
	if err := testStreams.Ensure(t.Context(), r.js, "CMD", "orders.cmd.>"); err != nil {
		t.Fatal(err)
	}
	a := &answers{list: []int{http.StatusConflict, http.StatusServiceUnavailable}}
	in := &Intake{JS: r.js, Dispatcher: a, Streams: testStreams, DeadLetters: "orders.deadletter",
		AckWait: 5 * time.Second, MaxAckPending: 4, Metrics: NewMetrics(prometheus.NewRegistry()), Log: r.log}
	entries, _ := ParseIntake([]byte(`{"intake":[{"stream":"CMD","consumer":"orders","subject":"orders.cmd.>","principal":"local"}]}`))
	if err := in.Apply(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	start := time.Now()
	reply := r.send(t, "orders.cmd.create", "k-1", create)
	a.mu.Lock()
	calls := a.calls
	a.mu.Unlock()
	if reply.Header.Get(StatusCode) != "201" || calls != 3 {
		t.Fatalf("reply %v after %d dispatches; want 201 after 3", reply.Header, calls)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("answered after %v: the redeliveries did not wait for Retry-After", took)
	}
	if n := testutil.ToFloat64(in.Metrics.messages.WithLabelValues("orders", outcomeRetried)); n != 2 {
		t.Errorf("retried: %v; want 2", n)
	}
	if n := testutil.ToFloat64(in.Metrics.redeliveries.WithLabelValues("orders")); n != 2 {
		t.Errorf("redeliveries: %v; want 2", n)
	}
}
