package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Dispatcher runs a command request as the API does (api.Server.Dispatch) and returns its
// answer once it is final, the outcome of its key durable.
type Dispatcher interface {
	Dispatch(ctx context.Context, caller access.Caller, method, path string, header http.Header, body []byte) (int, http.Header, []byte)
}

// Headers of the messages the intake reads and writes.
const (
	// ReplyTo names the subject to which a command's answer is sent (JetStream keeps no
	// message's own reply subject).
	ReplyTo = "Reply-To"
	// StatusCode carries the answer's HTTP status in replies and dead letters.
	StatusCode       = "Status-Code"
	originalSubject  = "Original-Subject"
	originalStream   = "Original-Stream"
	originalSequence = "Original-Sequence"
)

// Intake consumes commands from the JetStream consumers of its entries and runs each through
// Dispatcher, acknowledging a message once its answer is final (see settle).
type Intake struct {
	JS            jetstream.JetStream
	Dispatcher    Dispatcher
	Streams       Streams
	DeadLetters   string // the dead-letter subjects' prefix
	AckWait       time.Duration
	MaxAckPending int
	Metrics       *Metrics
	Log           *slog.Logger

	mu      sync.Mutex
	running map[Entry]jetstream.ConsumeContext
	work    sync.WaitGroup // the messages being handled
}

// Apply starts consuming for the entries not consumed yet, and stops the consumers of entries
// that are not in entries any more; it stops at the first that fails to start.
func (in *Intake) Apply(ctx context.Context, entries []Entry) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.running == nil {
		in.running = map[Entry]jetstream.ConsumeContext{}
	}
	keep := map[Entry]bool{}
	for _, e := range entries {
		keep[e] = true
		if in.running[e] != nil {
			continue
		}
		cc, err := in.consume(ctx, e)
		if err != nil {
			return fmt.Errorf("consumer %s of stream %s: %w", e.Consumer, e.Stream, err)
		}
		in.running[e] = cc
	}
	for e, cc := range in.running {
		if !keep[e] {
			cc.Stop()
			delete(in.running, e)
		}
	}
	return nil
}

// Stop stops every consumer and waits for the messages being handled.
func (in *Intake) Stop() {
	in.mu.Lock()
	for e, cc := range in.running {
		cc.Stop()
		delete(in.running, e)
	}
	in.mu.Unlock()
	in.work.Wait()
}

// consume makes e's stream if it is missing and its durable pull consumer, and handles its
// messages, MaxAckPending at once at most.
func (in *Intake) consume(ctx context.Context, e Entry) (jetstream.ConsumeContext, error) {
	if err := in.Streams.Ensure(ctx, in.JS, e.Stream, e.Subject); err != nil {
		return nil, err
	}
	cons, err := in.JS.CreateOrUpdateConsumer(ctx, e.Stream, jetstream.ConsumerConfig{
		Durable: e.Consumer, FilterSubject: e.Subject, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: in.AckWait, MaxAckPending: in.MaxAckPending, MaxDeliver: -1,
	})
	if err != nil {
		return nil, err
	}
	slots := make(chan struct{}, in.MaxAckPending)
	return cons.Consume(func(m jetstream.Msg) {
		slots <- struct{}{}
		in.work.Go(func() {
			defer func() { <-slots }()
			in.handle(ctx, e, m)
		})
	}, jetstream.PullMaxMessages(in.MaxAckPending), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		in.Log.Warn("nats consumer", "consumer", e.Consumer, "error", err)
	}))
}

// handle runs one command message, telling JetStream it is in progress while it runs.
func (in *Intake) handle(ctx context.Context, e Entry, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		in.Log.Warn("nats message without metadata", "consumer", e.Consumer, "error", err)
		return
	}
	if md.NumDelivered > 1 {
		in.Metrics.redeliveries.WithLabelValues(e.Consumer).Inc()
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(in.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	method, path := Route(e.Prefix(), m.Subject())
	header := commandHeader(m.Headers(), len(m.Data()) > 0)
	if header.Get("X-Request-Id") == "" {
		header.Set("X-Request-Id", md.Stream+"-"+strconv.FormatUint(md.Sequence.Stream, 10)) // the message, in the log lines
	}
	status, h, body := in.Dispatcher.Dispatch(ctx, e.Caller(), method, path, header, m.Data())
	close(done)
	outcome, err := in.settle(ctx, m, md, status, h, body)
	if err != nil {
		in.Log.Warn("nats command not settled; JetStream delivers it again", "consumer", e.Consumer, "subject", m.Subject(), "error", err)
		return
	}
	in.Metrics.messages.WithLabelValues(e.Consumer, outcome).Inc()
	if outcome == outcomeDead {
		in.Metrics.deadLetters.WithLabelValues(e.Consumer).Inc()
	}
}

// commandHeader is the request header of a command message: its own, its Idempotency-Key or
// else its Nats-Msg-Id as the key (none if neither: the API refuses it), JSON if it has a body.
func commandHeader(mh nats.Header, hasBody bool) http.Header {
	h := http.Header{}
	for k, v := range mh {
		h[http.CanonicalHeaderKey(k)] = v
	}
	if h.Get("Idempotency-Key") == "" {
		h.Del("Idempotency-Key")
		if id := mh.Get(jetstream.MsgIDHeader); id != "" {
			h.Set("Idempotency-Key", id)
		}
	}
	if hasBody && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return h
}

// settle acknowledges m by its answer: a 2xx is acked (its key's outcome is durable); an
// answer that a retry may change (a 5xx, 429, or one with Retry-After: the key in flight
// elsewhere, the order changing) is redelivered after the Go client's back-off for the
// delivery; any other is the command's for good, published as a dead letter and terminated.
// Replies go to the message's Reply-To subject, for every final answer.
func (in *Intake) settle(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, status int, h http.Header, body []byte) (string, error) {
	switch {
	case status >= 200 && status < 300:
		in.reply(m, status, h, body)
		if h.Get("Idempotent-Replayed") == "true" {
			return outcomeReplayed, m.Ack()
		}
		return outcomeApplied, m.Ack()
	case client.Retryable(status, h):
		delay := client.Backoff(int(min(md.NumDelivered, 32)), client.DefaultBaseDelay, client.DefaultMaxDelay, h)
		return outcomeRetried, m.NakWithDelay(delay)
	}
	if err := in.deadLetter(ctx, m, md, status, h, body); err != nil {
		delay := client.Backoff(int(min(md.NumDelivered, 32)), client.DefaultBaseDelay, client.DefaultMaxDelay, nil)
		return "", errors.Join(err, m.NakWithDelay(delay))
	}
	in.reply(m, status, h, body)
	return outcomeDead, m.TermWithReason(strconv.Itoa(status) + " " + problemType(body))
}

// problemType is the type of a problem+json body.
func problemType(body []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Type
}

// reply sends the answer to the message's Reply-To subject, if it names one.
func (in *Intake) reply(m jetstream.Msg, status int, h http.Header, body []byte) {
	to := m.Headers().Get(ReplyTo)
	if to == "" {
		return
	}
	if err := in.JS.Conn().PublishMsg(&nats.Msg{Subject: to, Header: answerHeader(status, h), Data: body}); err != nil {
		in.Log.Warn("nats reply", "subject", m.Subject(), "error", err)
	}
}

// answerHeader is an answer as message headers: the HTTP headers and Status-Code.
func answerHeader(status int, h http.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		out[k] = v
	}
	out.Set(StatusCode, strconv.Itoa(status))
	return out
}

// deadLetter publishes the problem that refused m to the dead-letter subject of m's subject,
// with m's headers, where it came from, and a Nats-Msg-Id of its own, so that a message dead
// lettered twice (its node stopped before the term) is stored once.
func (in *Intake) deadLetter(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, status int, h http.Header, body []byte) error {
	dh := nats.Header{}
	for k, v := range m.Headers() {
		if k != jetstream.MsgIDHeader {
			dh[k] = v
		}
	}
	for k, v := range answerHeader(status, h) {
		dh[k] = v
	}
	dh.Set(originalSubject, m.Subject())
	dh.Set(originalStream, md.Stream)
	dh.Set(originalSequence, strconv.FormatUint(md.Sequence.Stream, 10))
	id := md.Stream + "-" + strconv.FormatUint(md.Sequence.Stream, 10)
	dl := &nats.Msg{Subject: in.DeadLetters + "." + m.Subject(), Header: dh, Data: body}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := in.JS.PublishMsg(pctx, dl, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("dead letter of %s: %w", m.Subject(), err)
	}
	return nil
}
