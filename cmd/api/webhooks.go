package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/webhooks"
	"github.com/prometheus/client_golang/prometheus"
)

// webhookFlags configure the webhook deliveries of serve.
type webhookFlags struct {
	WebhooksSecretKeyFile string        `env:"API_WEBHOOKS_SECRET_KEY_FILE" placeholder:"FILE" help:"File holding the key (64 hex digits) that seals webhook signing secrets in the store; it may not be inside --data, so that a copy of the data directory does not reveal them. Or give the key in API_WEBHOOKS_SECRET_KEY. Without either, in development mode (no --keys-file) on the embedded store the key is made in --data as webhooks.key; otherwise webhooks are off (their routes answer 503)."`
	WebhooksGenerateKey   bool          `env:"API_WEBHOOKS_GENERATE_KEY" help:"Create --webhooks-secret-key-file with a new random key if it does not exist."`
	WebhooksAllowPrivate  bool          `env:"API_WEBHOOKS_ALLOW_PRIVATE" help:"Allow webhook URLs with plain http and loopback, private and link-local addresses (for tests and closed networks)."`
	WebhooksRetrySchedule string        `default:"0s,5s,5m,30m,2h,5h,10h,10h" env:"API_WEBHOOKS_RETRY_SCHEDULE" help:"Delay before each delivery attempt (retries get up to 20% jitter); after the last the delivery is dead-lettered."`
	WebhooksTimeout       time.Duration `default:"10s" env:"API_WEBHOOKS_TIMEOUT" help:"How long an endpoint has to answer an attempt with a 2xx."`
	WebhooksLease         time.Duration `default:"30s" env:"API_WEBHOOKS_LEASE" help:"How long a node holds an endpoint's deliveries without renewing; at least three --webhooks-timeout. Another node takes over once it has seen no new checkpoint for this long, by its own clock (the nodes' clocks need not agree)."`
	WebhooksDisableAfter  time.Duration `default:"120h" env:"API_WEBHOOKS_DISABLE_AFTER" help:"Disable an endpoint that has failed this long without a success (0: never)."`
	WebhooksMaxEndpoints  int           `default:"1000" env:"API_WEBHOOKS_MAX_ENDPOINTS" help:"Most webhook endpoints of one client; one more is refused with 422."`
	WebhooksInFlight      int           `default:"16" env:"API_WEBHOOKS_IN_FLIGHT" help:"Most attempts in flight at once per endpoint (one per order)."`
	WebhooksAttempts      int           `default:"256" env:"API_WEBHOOKS_ATTEMPTS" help:"Most attempts in flight at once on this node, whatever their endpoints; each holds one outgoing connection and as many more are kept idle, which the default of --max-connections leaves room for."`
	WebhooksPending       int           `default:"1000" env:"API_WEBHOOKS_PENDING" help:"Most deliveries an endpoint holds undone (in flight or waiting for a retry); it reads no further in the log until one is done."`
	WebhooksTailBuffer    int           `default:"1000" env:"API_WEBHOOKS_TAIL_BUFFER" help:"Most deliveries the node's one reader of the log holds for an endpoint until its runner takes them; past it the runner reads the log on its own until it catches up (0: every endpoint reads the log on its own)."`
	WebhooksDeadLetters   int           `default:"10000" env:"API_WEBHOOKS_DEAD_LETTERS" help:"Most events in an endpoint's dead-letter stream (dead letters and retries asked for by hand); past it the stream is truncated to its latest events, three quarters of this, and the older dead letters are dropped."`
}

// config is the deliveries' configuration from the flags.
func (f webhookFlags) config(singleNode bool, keyTTL time.Duration) (webhooks.Config, error) {
	c := webhooks.DefaultConfig()
	sched, err := webhooks.ParseSchedule(f.WebhooksRetrySchedule)
	if err != nil {
		return c, fmt.Errorf("--webhooks-retry-schedule: %w", err)
	}
	c.Schedule, c.Timeout, c.Lease, c.DisableAfter = sched, f.WebhooksTimeout, f.WebhooksLease, f.WebhooksDisableAfter
	c.MaxEndpoints, c.MaxInFlight, c.MaxPending = f.WebhooksMaxEndpoints, f.WebhooksInFlight, f.WebhooksPending
	c.TailBuffer, c.AllowPrivate, c.SingleNode = f.WebhooksTailBuffer, f.WebhooksAllowPrivate, singleNode
	c.MaxDeadLetters, c.MaxAttempts, c.KeyTTL = f.WebhooksDeadLetters, f.WebhooksAttempts, keyTTL
	return c, c.Check()
}

// devKeyFile is the webhook secret key of development mode on the embedded store, in the data
// directory.
const devKeyFile = "webhooks.key"

// sealer makes the secrets' sealer from the key file or API_WEBHOOKS_SECRET_KEY. Without
// either, in development mode on the embedded store (dev), the key is the data directory's
// devKeyFile, made at the first start: webhooks work out of the box on a laptop, where a copy
// of the data directory is the developer's own. Elsewhere, nil: webhooks are off.
func (f webhookFlags) sealer(dataDir string, dev bool, getenv func(string) string, log *slog.Logger) (*webhooks.Sealer, error) {
	var key []byte
	var err error
	switch env := getenv("API_WEBHOOKS_SECRET_KEY"); {
	case f.WebhooksSecretKeyFile != "" && env != "":
		return nil, errors.New("the webhook secret key is given twice: --webhooks-secret-key-file and API_WEBHOOKS_SECRET_KEY")
	case f.WebhooksSecretKeyFile != "":
		key, err = webhooks.LoadKeyFile(f.WebhooksSecretKeyFile, dataDir, f.WebhooksGenerateKey)
	case env != "":
		key, err = webhooks.ParseKey(env)
	case dev:
		path := filepath.Join(dataDir, devKeyFile)
		key, err = webhooks.ReadKeyFile(path, true)
		log.Info("webhook signing secrets sealed by the key in the data directory (development mode); with --keys-file, give --webhooks-secret-key-file outside it", "file", path)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return webhooks.NewSealer(key)
}

// startWebhooks starts the deliveries; stop waits for them to end. Without a key it returns
// nil: webhooks are off.
// single says the store has one server (storeFlags.singleServer): a lease left by a process
// that died is this one's to take at once. dev says the server runs in development mode.
func (f webhookFlags) start(ctx context.Context, e *env, dataDir string, store eventstore.Store, feed eventstore.Feed,
	single, dev bool, keyTTL time.Duration, node string, reg prometheus.Registerer, log *slog.Logger) (svc *webhooks.Service, stop func(), err error) {
	sealer, err := f.sealer(dataDir, dev && single, e.getenv, log)
	if err != nil || sealer == nil {
		return nil, func() {}, err
	}
	cfg, err := f.config(single, keyTTL)
	if err != nil {
		return nil, nil, err
	}
	svc = &webhooks.Service{Store: store, Feed: feed, Config: &cfg, Node: node, Log: log,
		Endpoints: &webhooks.Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	svc.Metrics = webhooks.NewMetrics(reg, svc)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil {
			log.Error("webhook deliveries not started", "error", err)
		}
	}()
	return svc, func() { cancel(); <-done }, nil
}

// webhooksCmd reads and retries deliveries through a running service's API.
type webhooksCmd struct {
	List       webhooksListCmd       `cmd:"" help:"List webhook endpoints (every client's, with an admin's or auditor's key)."`
	Deliveries webhooksDeliveriesCmd `cmd:"" help:"List an endpoint's failed (dead-lettered) or pending deliveries, with their attempts."`
	Retry      webhooksRetryCmd      `cmd:"" help:"Send a dead-lettered delivery again."`
}

type webhooksListCmd struct {
	adminClient
	Format string `default:"table" enum:"table,json" help:"table or json (the API's answer)."`
}

type webhooksDeliveriesCmd struct {
	adminClient
	Endpoint string `arg:"" help:"The endpoint's id."`
	Status   string `default:"failed" enum:"failed,pending" help:"failed (dead letters) or pending."`
	Format   string `default:"table" enum:"table,json" help:"table or json (the API's answer)."`
}

type webhooksRetryCmd struct {
	adminClient
	Endpoint string `arg:"" help:"The endpoint's id."`
	Delivery string `arg:"" help:"The delivery's id (the webhook-id)."`
}

func (cmd *webhooksListCmd) Run(ctx context.Context, e *env) error {
	if err := cmd.loadKey(); err != nil {
		return err
	}
	body, err := cmd.call(ctx, "GET", "/v1/webhook-endpoints")
	if err != nil || cmd.Format == "json" {
		return printRaw(e.stdout, body, err)
	}
	var page struct {
		Endpoints []struct{ ID, Principal, URL, Status, CreatedAt string } `json:"endpoints"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPRINCIPAL\tSTATUS\tCREATED\tURL")
	for _, ep := range page.Endpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ep.ID, ep.Principal, ep.Status, ep.CreatedAt, ep.URL)
	}
	return tw.Flush()
}

func (cmd *webhooksDeliveriesCmd) Run(ctx context.Context, e *env) error {
	if err := cmd.loadKey(); err != nil {
		return err
	}
	body, err := cmd.call(ctx, "GET", "/v1/webhook-endpoints/"+url.PathEscape(cmd.Endpoint)+"/deliveries?status="+cmd.Status)
	if err != nil || cmd.Format == "json" {
		return printRaw(e.stdout, body, err)
	}
	var page struct {
		Deliveries []struct {
			ID, Type, OrderID string
			Tries             int
			Attempts          []webhooks.Attempt
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tORDER\tTRIES\tLAST ATTEMPT")
	for _, d := range page.Deliveries {
		last := ""
		if n := len(d.Attempts); n > 0 {
			a := d.Attempts[n-1]
			last = strings.TrimSpace(fmt.Sprintf("%s %d %.0fms %s", a.At.Format(time.RFC3339), a.Status, a.LatencyMS, a.Error))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", d.ID, d.Type, d.OrderID, d.Tries, last)
	}
	return tw.Flush()
}

func (cmd *webhooksRetryCmd) Run(ctx context.Context, e *env) error {
	if err := cmd.loadKey(); err != nil {
		return err
	}
	path := "/v1/webhook-endpoints/" + url.PathEscape(cmd.Endpoint) + "/deliveries/" + url.PathEscape(cmd.Delivery) + "/retry"
	if _, err := cmd.call(ctx, "POST", path); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "delivery %s of %s will be sent again\n", cmd.Delivery, cmd.Endpoint)
	return nil
}

func printRaw(w io.Writer, body []byte, err error) error {
	if err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}
