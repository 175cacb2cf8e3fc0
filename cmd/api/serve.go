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
	"syscall"
	"time"

	"github.com/acme/orders/api"
	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
)

type serveCmd struct {
	Addr      string        `default:"127.0.0.1:8080" env:"API_ADDR" help:"Address to listen on."`
	Data      string        `default:"./data" env:"API_DATA" help:"Data directory of the embedded event store."`
	KeysFile  string        `env:"API_KEYS_FILE" help:"File of API keys, one '<principal> <sha256-hex-of-key> [role,...]' per line (roles client, auditor, admin; client if none; see 'api keys add'). Without it the service runs in development mode: every request is the principal 'local', and only a loopback address is allowed."`
	KeyTTL    time.Duration `default:"24h" env:"API_KEY_TTL" help:"How long an Idempotency-Key is kept."`
	KeyWait   time.Duration `default:"2s" env:"API_KEY_WAIT" help:"How long a duplicate waits for the request that holds its key."`
	KeyLease  time.Duration `default:"10s" env:"API_KEY_LEASE" help:"How long a claim holds its key before another request may take it over."`
	KeyMemory int           `default:"65536" env:"API_KEY_MEMORY" help:"How many Idempotency-Keys completed here are kept in memory, so that their replays read nothing from the store (about 1 KiB each; 0 for none); an eighth as many more keep the keys read back from the store for a replay."`
	Shutdown  time.Duration `default:"15s" env:"API_SHUTDOWN_TIMEOUT" help:"How long a graceful shutdown waits for in-flight requests."`

	PprofAddr string `env:"API_PPROF_ADDR" help:"Loopback address to serve runtime profiles (net/http/pprof) on; none if empty."`

	Limits limitFlags `embed:""`

	Backend storeFlags `embed:""`
}

func (cmd *serveCmd) Run(ctx context.Context, e *env) error {
	logs := newLogBuffer(e.stderr, 100*time.Millisecond)
	defer logs.Close()
	log := slog.New(slog.NewJSONHandler(logs, nil))
	keys, err := readKeys(cmd.KeysFile)
	if err != nil {
		return err
	}
	if err := servePprof(ctx, cmd.PprofAddr, log); err != nil {
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
	store, err := cmd.Backend.openWith(ctx, cmd.Data, log, sqlite.Config{OnBatch: metrics.ObserveBatch, OnWAL: metrics.ObserveWAL})
	if err != nil {
		return err
	}
	defer store.Close()
	timed := metrics.TimeAppends(store)
	idem := &idempotency.Keys{Store: timed, TTL: cmd.KeyTTL, Lease: cmd.KeyLease, Wait: cmd.KeyWait, Remember: cmp.Or(cmd.KeyMemory, -1)}
	runner, stopProjections, err := startProjections(ctx, cmd.Data, store, log)
	if err != nil {
		return err
	}
	defer stopProjections()
	metrics.WatchProjections(runner)
	srv := &api.Server{
		Store:       store,
		Feed:        store,
		Projections: runner,
		Reads:       projections.Queries{DB: runner.DB},
		Orders:      &command.Handler{Store: timed},
		Keys:        idem,
		// As many fingerprints as completed keys: those are what retries send again.
		Fingerprints: idempotency.NewFingerprints(cmd.KeyMemory),
		IDs:          command.NewOrderIDs(),
		Log:          log,
		APIKeys:      keys,
		Node:         nodeName(),
		Hooks:        testHooks(e.getenv),

		Ready:          api.Readiness(store, runner),
		Metrics:        metrics,
		RequestTimeout: cmd.Limits.RequestTimeout,
		BodyMemory:     cmd.Limits.BodyMemory,
	}
	idem.Observe = srv.ObserveKey
	if cmd.KeysFile != "" {
		stopReload := reloadKeysOnHangup(ctx, cmd.KeysFile, srv, log)
		defer stopReload()
	}

	if ks, ok := store.(*kurrent.Store); ok {
		// KurrentDB hides a key's events once they are past their stream's $maxAge, and a
		// scavenge removes them: no sweeper (see eventstore/kurrent's package doc).
		idem.Expire = ks.SetMaxAge
	} else {
		sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			if err := idem.Sweep(sweepCtx, store, min(cmd.KeyTTL/10, time.Minute)); err != nil {
				log.Error("key sweeper stopped", "error", err)
			}
		}()
		defer func() { stopSweep(); <-swept }()
	}

	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cmd.Limits.ReadHeaderTimeout,
		ReadTimeout:       cmd.Limits.ReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(e.stdout, "listening on http://%s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "data", cmd.Data, "development_mode", len(keys) == 0)

	var serveErr error // the listener failed: shut down all the same
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	// Stop accepting, let in-flight commands finish; the store closes after them (deferred).
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cmd.Shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Handlers may still be running: outcomes not recorded by now are rebuilt from the
		// order streams by the next retry, as after a crash.
		return errors.Join(serveErr, fmt.Errorf("shutdown: %w", err))
	}
	// Every handler has returned: record the outcomes of answers already given.
	if err := srv.Drain(sctx); err != nil {
		return errors.Join(serveErr, fmt.Errorf("shutdown: %w", err))
	}
	return serveErr
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

// testHooks lets the end-to-end tests kill the process at the moments that matter:
// API_TEST_CRASH_AFTER_CLAIM, API_TEST_CRASH_AFTER_APPEND and API_TEST_CRASH_AFTER_ANSWER name
// the Idempotency-Key whose request dies there (after the answer: once it has had 200 ms to
// leave, before the outcome is recorded).
func testHooks(getenv func(string) string) api.Hooks {
	crash := func(key string) func(string) {
		if key == "" {
			return nil
		}
		return func(k string) {
			if k == key {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never return into the request
			}
		}
	}
	hooks := api.Hooks{
		AfterClaim:  crash(getenv("API_TEST_CRASH_AFTER_CLAIM")),
		AfterAppend: crash(getenv("API_TEST_CRASH_AFTER_APPEND")),
	}
	if key := getenv("API_TEST_CRASH_AFTER_ANSWER"); key != "" {
		answered := crash(key)
		hooks.AfterAnswer = func(k string) {
			if k == key {
				time.Sleep(200 * time.Millisecond) // for the answer to leave the process
				answered(k)
			}
		}
	}
	return hooks
}
