package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/acme/orders/api"
	"github.com/acme/orders/command"
	"github.com/acme/orders/console"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/internal/requestlog"
	"github.com/acme/orders/lease"
	"github.com/acme/orders/projections"
	"github.com/acme/orders/providers"
	"github.com/prometheus/client_golang/prometheus"
)

type serveCmd struct {
	Addr             string        `default:"127.0.0.1:8080" env:"API_ADDR" help:"Address to listen on."`
	Data             string        `default:"./data" env:"API_DATA" help:"Data directory of the embedded event store."`
	KeysFile         string        `env:"API_KEYS_FILE" help:"File of API keys, one '<principal> <sha256-hex-of-key> [role,...]' per line (roles client, auditor, admin; client if none; see 'api keys add'). Without it the service runs in development mode: every request is the principal 'local', and only a loopback address is allowed."`
	PaymentProviders string        `env:"API_PAYMENT_PROVIDERS" help:"File of the payment providers whose signed events POST /v1/provider-events/{provider} takes (JSON; see the README's 'Payment providers'). Read again on SIGHUP."`
	KeyTTL           time.Duration `default:"24h" env:"API_KEY_TTL" help:"How long an Idempotency-Key is kept from its first claim, for every key kept."`
	KeyWait          time.Duration `default:"2s" env:"API_KEY_WAIT" help:"How long a duplicate waits for the request that holds its key."`
	KeyLease         time.Duration `default:"10s" env:"API_KEY_LEASE" help:"How long a claim holds its key: another request takes it over once it has seen the claim unchanged for this long, by its own clock (the nodes' clocks need not agree), or at once when the claim's node is gone (the embedded store has one process)."`
	KeyMemory        uint          `default:"64" env:"API_KEY_MEMORY" help:"MiB of memory for the outcomes of Idempotency-Keys, so that their replays read nothing from the store (0 for none); an eighth of it keeps the keys read back from the store for a replay. An outcome over 64 KiB stays in the store: its replays read it."`
	OrderMemory      uint          `default:"16" env:"API_ORDER_MEMORY" help:"MiB of memory for the orders last folded or written, so that a command on one of them reads nothing before its append (0 for none); each is charged its size (about 1.7 KB for a small order, 11 KB for one of 100 lines)."`
	Shutdown         time.Duration `name:"shutdown-timeout" default:"15s" env:"API_SHUTDOWN_TIMEOUT" help:"How long a graceful shutdown waits for in-flight requests."`
	Writeback        time.Duration `default:"50ms" env:"API_WRITEBACK" help:"How often the disk is asked to start writing what the checkpoints of the embedded store and of the read models copied, without waiting for it (Linux), so that their syncs do not hold the commits; 0 for never."`

	PprofAddr string `env:"API_PPROF_ADDR" help:"Loopback address to serve runtime profiles (net/http/pprof) on; none if empty."`

	ConsoleSessions      int           `default:"10000" env:"API_CONSOLE_SESSIONS" help:"Sessions of the console (/console/) held in memory; signing in past it ends the oldest. Sessions end with the process."`
	ConsoleSessionsEach  int           `default:"16" env:"API_CONSOLE_SESSIONS_EACH" help:"Sessions of one principal at the console; its signing in past it ends its own oldest session, never another principal's."`
	ConsoleSessionTTL    time.Duration `default:"8h" env:"API_CONSOLE_SESSION_TTL" help:"How long a console session lasts from its sign-in."`
	ConsoleSecureCookies bool          `env:"API_CONSOLE_SECURE_COOKIES" help:"Mark the console's cookies Secure on plain HTTP too: set it when a proxy in front ends TLS (without it, only requests over TLS get Secure cookies)."`

	Limits limitFlags `embed:""`

	Backend storeFlags `embed:""`

	Webhooks webhookFlags `embed:""`

	Nats natsFlags `embed:""`

	providers *providers.Set // read from PaymentProviders at start
	nats      *natsService   // nil without --nats-url
}

func (cmd *serveCmd) Run(ctx context.Context, e *env) error {
	// Lines logged with a request's context, by any package, name the request.
	log := requestlog.Logger(slog.New(slog.NewJSONHandler(e.stderr, nil)))
	keys, err := cmd.readFiles()
	if err != nil {
		return err
	}
	if err := servePprof(ctx, cmd.PprofAddr, log); err != nil {
		return err
	}
	maxConns, err := cmd.Limits.maxConnections(2 * cmd.Webhooks.WebhooksAttempts)
	if err != nil {
		return err
	}
	memoryLimit, err := cmd.Limits.setMemoryLimit(int64(cmd.KeyMemory)+int64(cmd.OrderMemory)+cmd.Limits.BodyMemory+cmd.Limits.ProviderBodyMemory, e.getenv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cmd.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if len(keys) == 0 && !loopback(ln.Addr()) {
		return fmt.Errorf("development mode (no --keys-file) only listens on a loopback address, not %s", ln.Addr())
	}
	release, err := lockData(cmd.Data)
	if err != nil {
		return err
	}
	defer release()
	metrics := api.NewMetrics()
	store, err := cmd.Backend.openWith(ctx, cmd.Data, log, sqlite.Config{OnBatch: metrics.Store.ObserveBatch, OnWAL: metrics.Store.ObserveWAL, Writeback: cmd.writeback()})
	if err != nil {
		return err
	}
	defer store.Close()
	var started stops
	defer started.run()
	srv, err := cmd.server(ctx, e, store, metrics, keys, log, &started)
	if err != nil {
		return err
	}
	hs := cmd.httpServer(srv)
	if err := cmd.nats.start(ctx); err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(api.NewListener(ln, maxConns, metrics, log)) }()
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "data", cmd.Data, "development_mode", len(keys) == 0,
		"max_connections", maxConns, "idle_timeout", cmd.Limits.IdleTimeout.String(), "memory_limit_bytes", memoryLimit)
	return shutDown(ctx, served, hs, srv, cmd.Shutdown, log)
}

// httpServer is the HTTP server of srv's handlers, with the limits' timeouts.
func (cmd *serveCmd) httpServer(srv *api.Server) *http.Server {
	return &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cmd.Limits.ReadHeaderTimeout,
		ReadTimeout:       cmd.Limits.ReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       cmd.Limits.IdleTimeout,
		MaxHeaderBytes:    api.MaxHeaderBytes,
	}
}

// readFiles reads the keys file, which it returns, and the providers file: one that cannot be
// used stops the start before anything else.
func (cmd *serveCmd) readFiles() (api.APIKeys, error) {
	keys, err := readKeys(cmd.KeysFile)
	if err != nil {
		return nil, err
	}
	if cmd.PaymentProviders != "" {
		if cmd.providers, err = providers.ReadFile(cmd.PaymentProviders); err != nil {
			return nil, fmt.Errorf("--payment-providers: %w", err)
		}
	}
	return keys, nil
}

// writeback is --writeback for the stores: never, for 0.
func (cmd *serveCmd) writeback() time.Duration { return cmp.Or(cmd.Writeback, -1) }

// stops are the stop functions of what a start started, run in the reverse order.
type stops []func()

func (s *stops) add(stop func()) { *s = append(*s, stop) }

// run stops them; a pointer, so that a deferred run sees the stops added after the defer.
func (s *stops) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
}

// The PostgreSQL store tells readiness when its server turns read-only (see api.Readiness):
// a rename of its method must not silently end that.
var _ api.WriteChecker = (*postgres.Store)(nil)

// server makes the API server on store and starts what runs beside it (the projections, the
// console's sessions, the webhooks, the reload of the keys file), adding their
// stops to started.
func (cmd *serveCmd) server(ctx context.Context, e *env, store backend, metrics *api.Metrics, keys api.APIKeys, log *slog.Logger, started *stops) (*api.Server, error) {
	timed := metrics.Store.TimeAppends(store)
	node := nodeName()
	idem := &idempotency.Keys{Store: timed, TTL: cmd.KeyTTL, Lease: lease.Terms{Length: cmd.KeyLease, Node: node, Sole: cmd.Backend.embedded()},
		Wait: cmd.KeyWait, RememberBytes: cmp.Or(int64(cmd.KeyMemory)<<20, -1), Log: log, Steps: idempotency.NewSteps(metrics.Registry)}
	runner, stopProjections, err := startProjections(ctx, cmd.Data, store, sqlite.DBConfig{Writeback: cmd.writeback()}, log)
	if err != nil {
		return nil, err
	}
	started.add(stopProjections)
	metrics.WatchProjections(runner)
	orders := &command.Handler{Store: timed, CachedOrderBytes: cmp.Or(int64(cmd.OrderMemory)<<20, -1)}
	srv := &api.Server{
		Store: store, Feed: store, Projections: runner, Reads: projections.Queries{DB: runner.DB},
		Orders: orders, Keys: idem, IDs: command.NewOrderIDs(), Log: log,
		APIKeys: keys, LoopbackHosts: len(keys) == 0, Node: node, Hooks: testHooks(e.getenv),
		Ready:          withWritableData(api.Readiness(store, runner), cmd.Data),
		Metrics:        metrics,
		RequestTimeout: cmd.Limits.RequestTimeout,
		BodyMemory:     cmd.Limits.BodyMemory << 20,
		// Not verified yet when they are read: a budget of their own.
		ProviderBodyMemory: cmd.Limits.ProviderBodyMemory << 20,
	}
	services := console.Services{Orders: orders, Reads: srv.Reads, Projections: runner, Feed: store, Log: log,
		Authenticate: srv.AuthenticateHash, CaughtUp: srv.CaughtUp, Development: len(keys) == 0}
	if srv.Console, err = console.New(ctx, services, console.Config{MaxSessions: cmd.ConsoleSessions, MaxSessionsPerPrincipal: cmd.ConsoleSessionsEach, SessionTTL: cmd.ConsoleSessionTTL, SecureCookies: cmd.ConsoleSecureCookies}); err != nil {
		return nil, err
	}
	var stopWebhooks func()
	if srv.Webhooks, stopWebhooks, err = cmd.Webhooks.start(ctx, e, cmd.Data, timed, store, cmd.Backend.embedded(), len(keys) == 0, cmd.KeyTTL, srv.Node, metrics.Registry, log); err != nil {
		return nil, err
	}
	started.add(stopWebhooks)
	watchMemories(metrics.Registry, idem, orders)
	var reloads []func()
	if cmd.KeysFile != "" {
		reloads = append(reloads, reloadKeys(cmd.KeysFile, srv, log))
	}
	if cmd.PaymentProviders != "" {
		srv.SetProviders(cmd.providers)
		reloads = append(reloads, reloadProviders(cmd.PaymentProviders, srv, log))
	}
	if cmd.nats, err = cmd.Nats.open(ctx, srv, timed, store, idem.Lease, cmd.KeyWait, metrics.Registry, log); err != nil {
		return nil, err
	}
	started.add(cmd.nats.stop)
	if cmd.nats != nil && cmd.Nats.NatsIntake != "" {
		reloads = append(reloads, cmd.nats.reload)
	}
	started.add(reloadOnHangup(ctx, reloads...))
	return srv, nil
}

// shutDown waits for the server to fail or ctx to end, then stops accepting and lets the
// requests in flight finish within timeout; the store closes after it returns.
func shutDown(ctx context.Context, served <-chan error, hs *http.Server, srv *api.Server, timeout time.Duration, log *slog.Logger) error {
	var serveErr error // the listener failed: shut down all the same
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Handlers may still be running: a key they hold is taken over by the next retry,
		// which finds in the order's stream whether the command took effect, as after a crash.
		return errors.Join(serveErr, fmt.Errorf("shutdown: %w", err))
	}
	return serveErr
}

// watchMemories registers the gauges of the bounded memories: the completed keys' and the
// cached orders'.
func watchMemories(reg prometheus.Registerer, idem *idempotency.Keys, orders *command.Handler) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orders_idempotency_memory_bytes",
		Help: "Bytes that the completed keys kept in memory take, as charged against --key-memory.",
	}, func() float64 { return float64(idem.RememberedBytes()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orders_order_memory_bytes",
		Help: "Bytes that the orders kept in memory as last folded or written take, as charged against --order-memory.",
	}, func() float64 { return float64(orders.CachedBytes()) }))
}

// withWritableData adds to ready a write of one page into the data directory, synced and
// removed: a full disk, or any other reason writes fail there, turns readiness to 503, and back
// to 200 by itself once a write succeeds again, with no command needed to find out.
func withWritableData(ready func(context.Context) error, dir string) func(context.Context) error {
	page := make([]byte, 4096)
	return func(ctx context.Context) error {
		if err := ready(ctx); err != nil {
			return err
		}
		f, err := os.CreateTemp(dir, ".readiness-*")
		if err != nil {
			return fmt.Errorf("the data directory takes no writes: %w", err)
		}
		defer os.Remove(f.Name())
		if _, err = f.Write(page); err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("the data directory takes no writes: %w", err)
		}
		return nil
	}
}

func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// nodeName names this process in key claims: host and a random suffix.
func nodeName() string {
	host, _ := os.Hostname()
	return host + "-" + rand.Text()[:8]
}
