package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/sqlite"
)

// storeFlags choose the event store. Read models stay in the local data directory with
// either: with KurrentDB they are fed from its $all.
type storeFlags struct {
	Store        string `default:"sqlite" enum:"sqlite,kurrentdb" env:"API_STORE" help:"Event store: 'sqlite' (embedded, in --data) or 'kurrentdb' (the server at --kurrentdb-url; read models stay in --data)."`
	KurrentDBURL string `name:"kurrentdb-url" env:"API_KURRENTDB_URL" placeholder:"URL" help:"KurrentDB connection string, e.g. 'esdb://localhost:2113?tls=false'; TLS, credentials and cluster seeds are its parameters."`
}

// singleServer reports whether the store has one server: the embedded store, whose data
// directory one process holds at a time (a second refuses to start).
func (f storeFlags) singleServer() bool { return f.Store == "sqlite" }

// backend is an event store the service runs on.
type backend interface {
	eventstore.Store
	eventstore.Feed
	Close() error
}

// connectTimeout bounds the first call to KurrentDB at startup.
const connectTimeout = 15 * time.Second

// open opens the chosen store. A KurrentDB store is asked for its head once, so that a wrong
// address or credentials stop the start instead of failing every request.
func (f storeFlags) open(ctx context.Context, dataDir string, log *slog.Logger) (backend, error) {
	return f.openWith(ctx, dataDir, log, sqlite.Config{})
}

// openWith is open for the service, whose embedded store reports to the hooks of embedded
// (its group commits and its write-ahead log), for metrics.
func (f storeFlags) openWith(ctx context.Context, dataDir string, log *slog.Logger, embedded sqlite.Config) (backend, error) {
	switch f.Store {
	case "kurrentdb":
		if f.KurrentDBURL == "" {
			return nil, errors.New("--store kurrentdb needs --kurrentdb-url (or API_KURRENTDB_URL)")
		}
		s, err := kurrent.Open(kurrent.Config{URL: f.KurrentDBURL, Log: log})
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		if _, err := s.Head(cctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("kurrentdb: %w", err)
		}
		return s, nil
	default:
		return sqlite.Open(dataDir, embedded)
	}
}
