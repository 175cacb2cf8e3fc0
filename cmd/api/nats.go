package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/api"
	"github.com/acme/orders/broker"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/lease"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// natsFlags configure the commands from NATS JetStream and the events to it; none of it runs
// without --nats-url.
type natsFlags struct {
	NatsURL              string        `name:"nats-url" env:"API_NATS_URL" placeholder:"URL" help:"NATS server to take commands from and publish every order event to, e.g. 'nats://127.0.0.1:4222' (several separated by commas); a user and password or a token in the URL, or --nats-creds. Without it nothing of NATS runs."`
	NatsCreds            string        `name:"nats-creds" env:"API_NATS_CREDS" placeholder:"FILE" help:"NATS credentials file (a user's JWT and NKey seed) to connect with."`
	NatsIntake           string        `name:"nats-intake" env:"API_NATS_INTAKE" placeholder:"FILE" help:"File of the JetStream consumers whose messages are commands, and the principal each acts as (JSON; see the README's 'Message queue'). Read again on SIGHUP."`
	NatsMaxAckPending    int           `name:"nats-max-ack-pending" default:"256" env:"API_NATS_MAX_ACK_PENDING" help:"Most command messages of one consumer delivered and not yet settled, on all nodes together; this node runs at most as many at once."`
	NatsAckWait          time.Duration `name:"nats-ack-wait" default:"30s" env:"API_NATS_ACK_WAIT" help:"How long JetStream waits for a command message's acknowledgement before delivering it again; longer than --key-wait. A message whose command runs is said to be in progress every third of it."`
	NatsDeadLetterPrefix string        `name:"nats-dead-letter-prefix" default:"orders.deadletter" env:"API_NATS_DEAD_LETTER_PREFIX" help:"Prefix of the subjects where commands that can never succeed are published with their problem: <prefix>.<the command's subject>."`
	NatsDeadLetterStream string        `name:"nats-dead-letter-stream" default:"ORDERS_DEADLETTER" env:"API_NATS_DEAD_LETTER_STREAM" help:"The JetStream stream of the dead letters, made if missing."`
	NatsEventsPrefix     string        `name:"nats-events-prefix" default:"orders.events" env:"API_NATS_EVENTS_PREFIX" help:"Prefix of the subjects every order event is published to: <prefix>.<order id>."`
	NatsEventsStream     string        `name:"nats-events-stream" default:"ORDERS_EVENTS" env:"API_NATS_EVENTS_STREAM" help:"The JetStream stream of the events, made if missing."`
	NatsPublishBatch     int           `name:"nats-publish-batch" default:"256" env:"API_NATS_PUBLISH_BATCH" help:"Most events published and not yet acknowledged by JetStream; the checkpoint moves past each batch once all of it is."`
	NatsLease            time.Duration `name:"nats-lease" default:"10s" env:"API_NATS_LEASE" help:"How long the node that publishes the events holds that without renewing; another takes over once it has seen no new checkpoint for this long, by its own clock."`
	NatsMaxAge           time.Duration `name:"nats-max-age" default:"168h" env:"API_NATS_MAX_AGE" help:"Bound of the messages' age in the streams the service makes (commands, events, dead letters)."`
	NatsMaxBytes         int64         `name:"nats-max-bytes" default:"1024" env:"API_NATS_MAX_BYTES" help:"Bound of each stream the service makes, in MiB; past it the oldest messages go."`
	NatsDuplicateWindow  time.Duration `name:"nats-duplicate-window" default:"2m" env:"API_NATS_DUPLICATE_WINDOW" help:"How long the streams the service makes remember a Nats-Msg-Id, to store a message published again once."`
}

// natsService is the service's connection to NATS, its intake and its publisher.
type natsService struct {
	flags     natsFlags
	entries   []broker.Entry // the intake file's, as read at start
	nc        *nats.Conn
	intake    *broker.Intake
	publisher *broker.Publisher
	log       *slog.Logger
	wg        sync.WaitGroup
	cancel    context.CancelFunc
}

// open connects to NATS and makes the intake and the publisher of srv on store, if --nats-url is
// given (else nil); srv's readiness then names the connection's state. An intake file that
// cannot be used, a connection refused or a stream that cannot be made stops the start, as does
// a consumer that cannot be made (start).
func (f natsFlags) open(ctx context.Context, srv *api.Server, store eventstore.Store, feed eventstore.Feed, terms lease.Terms, keyWait time.Duration, reg prometheus.Registerer, log *slog.Logger) (*natsService, error) {
	if f.NatsURL == "" {
		return nil, nil
	}
	if f.NatsAckWait <= keyWait || f.NatsMaxAckPending < 1 || f.NatsPublishBatch < 1 || f.NatsLease <= 0 {
		return nil, fmt.Errorf("--nats-ack-wait %v must be longer than --key-wait %v; --nats-max-ack-pending, --nats-publish-batch and --nats-lease above 0", f.NatsAckWait, keyWait)
	}
	// A successor publishes again what was published since the last checkpoint, up to a third
	// of the lease's worth, once the lease has run out: the window must still hold those ids.
	if f.NatsDuplicateWindow < 2*f.NatsLease {
		return nil, fmt.Errorf("--nats-duplicate-window %v must be at least twice --nats-lease %v: a node that takes over publishes again the events of up to a third of a lease before the lease ran out", f.NatsDuplicateWindow, f.NatsLease)
	}
	var entries []broker.Entry
	if f.NatsIntake != "" {
		var err error
		if entries, err = broker.ReadIntake(f.NatsIntake); err != nil {
			return nil, fmt.Errorf("--nats-intake: %w", err)
		}
	}
	nc, err := broker.Connect(f.NatsURL, f.NatsCreds, "orders "+terms.Node, log, f.redact)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(f.NatsPublishBatch))
	if err != nil {
		nc.Close()
		return nil, err
	}
	streams := broker.Streams{MaxAge: f.NatsMaxAge, MaxBytes: f.NatsMaxBytes << 20, Duplicates: f.NatsDuplicateWindow}
	if err := cmp.Or(streams.Ensure(ctx, js, f.NatsEventsStream, f.NatsEventsPrefix+".>"),
		streams.Ensure(ctx, js, f.NatsDeadLetterStream, f.NatsDeadLetterPrefix+".>")); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats streams: %s", f.redact(err.Error()))
	}
	metrics := broker.NewMetrics(reg)
	s := &natsService{flags: f, nc: nc, log: log}
	s.intake = &broker.Intake{JS: js, Dispatcher: srv, Streams: streams, DeadLetters: f.NatsDeadLetterPrefix,
		AckWait: f.NatsAckWait, MaxAckPending: f.NatsMaxAckPending, Metrics: metrics, Log: log}
	s.publisher = &broker.Publisher{JS: js, Store: store, Feed: feed, Prefix: f.NatsEventsPrefix, Stream: f.NatsEventsStream,
		Streams: streams, Batch: f.NatsPublishBatch, Lease: lease.Terms{Length: f.NatsLease, Node: terms.Node, Sole: terms.Sole}, Metrics: metrics, Log: log}
	s.entries = entries
	srv.Broker = func() string { return broker.State(nc) }
	log.Info("nats", "server", nc.ConnectedUrlRedacted(), "consumers", len(entries), "events", f.NatsEventsPrefix+".>")
	return s, nil
}

// start consumes the commands and publishes the events until stop: once the API's handlers
// are made (api.Server.Handler), which the commands run through.
func (s *natsService) start(ctx context.Context) error {
	if s == nil {
		return nil
	}
	if err := s.intake.Apply(ctx, s.entries); err != nil {
		return fmt.Errorf("--nats-intake: %s", s.flags.redact(err.Error()))
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() { s.publisher.Run(ctx) })
	return nil
}

// stop stops consuming, waits for the commands running, stops publishing and disconnects.
func (s *natsService) stop() {
	if s == nil {
		return
	}
	s.intake.Stop()
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.nc.Close()
}

// reload reads the intake file again and consumes as it says; a file that cannot be used
// leaves the consumers as they are.
func (s *natsService) reload() {
	entries, err := broker.ReadIntake(s.flags.NatsIntake)
	if err == nil {
		err = s.intake.Apply(context.Background(), entries)
	}
	if err != nil {
		s.log.Error("nats intake file not reloaded; the consumers in use stay", "file", s.flags.NatsIntake, "error", s.flags.redact(err.Error()))
		return
	}
	s.log.Info("nats intake file reloaded", "file", s.flags.NatsIntake, "consumers", len(entries))
}

// redact masks the credentials of the URLs in msg, as the PostgreSQL URL's are masked.
func (f natsFlags) redact(msg string) string { return postgres.Redact(msg, natsSecrets(f.NatsURL)...) }

// natsSecrets are the passwords and tokens of a comma-separated list of NATS URLs.
func natsSecrets(urls string) []string {
	var out []string
	for _, raw := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			continue
		}
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		} else {
			out = append(out, u.User.Username()) // a token
		}
	}
	return out
}

type natsCmd struct {
	Send natsSendCmd `cmd:"" help:"Publish a command to a JetStream stream of the service's intake and print its answer, as the service replies it."`
}

// natsSendCmd publishes one command with its key and a reply subject, and waits for the reply.
type natsSendCmd struct {
	Subject   string        `arg:"" help:"The command's subject, e.g. orders.cmd.create or orders.cmd.<order id>.payments (see the README's table)."`
	Key       string        `required:"" placeholder:"KEY" help:"The command's Idempotency-Key."`
	Data      string        `placeholder:"JSON" help:"The command's body, as the REST route takes it."`
	NatsURL   string        `name:"nats-url" default:"nats://127.0.0.1:4222" env:"API_NATS_URL" placeholder:"URL" help:"The NATS server."`
	NatsCreds string        `name:"nats-creds" env:"API_NATS_CREDS" placeholder:"FILE" help:"NATS credentials file."`
	Timeout   time.Duration `default:"30s" help:"How long to wait for the answer."`
}

func (c *natsSendCmd) Run(ctx context.Context, e *env) error {
	f := natsFlags{NatsURL: c.NatsURL}
	opts := []nats.Option{nats.Timeout(5 * time.Second)}
	if c.NatsCreds != "" {
		opts = append(opts, nats.UserCredentials(c.NatsCreds))
	}
	nc, err := nats.Connect(c.NatsURL, opts...)
	if err != nil {
		return fmt.Errorf("nats: %s", f.redact(err.Error()))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	m := &nats.Msg{Subject: c.Subject, Data: []byte(c.Data), Header: nats.Header{
		"Idempotency-Key": {c.Key}, broker.ReplyTo: {inbox}, "Content-Type": {"application/json"}}}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish to %s (is it a subject of the intake's stream?): %w", c.Subject, err)
	}
	reply, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return fmt.Errorf("no answer within %v: %w", c.Timeout, err)
	}
	return printReply(e, reply)
}

// printReply prints the answer's status and body, one line each, as api provider send does;
// an answer other than 2xx is an error.
func printReply(e *env, reply *nats.Msg) error {
	code, _ := strconv.Atoi(reply.Header.Get(broker.StatusCode))
	status := strconv.Itoa(code) + " " + http.StatusText(code)
	if reply.Header.Get("Idempotent-Replayed") == "true" {
		status += " (Idempotent-Replayed: the first answer again)"
	}
	fmt.Fprintln(e.stdout, status)
	fmt.Fprintln(e.stdout, cmp.Or(oneLine(reply.Data), "(no body)"))
	if code < 200 || code >= 300 {
		return errors.New("the service refused the command")
	}
	return nil
}
