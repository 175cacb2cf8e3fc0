package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/eventstore/sqlite"
)

// storeFlags choose the event store. Read models stay in the local data directory with
// any: with KurrentDB or PostgreSQL they are fed from the shared log.
type storeFlags struct {
	Store        string `default:"sqlite" enum:"sqlite,kurrentdb,postgres" env:"API_STORE" help:"Event store: 'sqlite' (embedded, in --data), 'kurrentdb' (the server at --kurrentdb-url) or 'postgres' (the database at --postgres-url); read models stay in --data."`
	KurrentDBURL string `name:"kurrentdb-url" env:"API_KURRENTDB_URL" placeholder:"URL" help:"KurrentDB connection string, e.g. 'esdb://localhost:2113?tls=false'; TLS, credentials and cluster seeds are its parameters."`
	PostgresURL  string `name:"postgres-url" env:"API_POSTGRES_URL" placeholder:"URL" help:"PostgreSQL database, e.g. 'postgres://orders@db:5432/orders'; prefer the environment variable or a password file (PGPASSFILE) to a password in the URL, which every user of the machine sees in the process list."`

	PostgresConns            int32         `name:"postgres-conns" default:"16" env:"API_POSTGRES_CONNS" help:"Connections of the PostgreSQL pool (one more listens for new events)."`
	PostgresStatementTimeout time.Duration `name:"postgres-statement-timeout" default:"10s" env:"API_POSTGRES_STATEMENT_TIMEOUT" help:"Bound of every PostgreSQL statement, a writer's wait for the write lock included."`
	PostgresConnectTimeout   time.Duration `name:"postgres-connect-timeout" default:"5s" env:"API_POSTGRES_CONNECT_TIMEOUT" help:"Bound of each connection attempt to PostgreSQL."`
}

// embedded reports whether the store is the embedded one, in the data directory: it has one
// server, the one process that holds the directory (a second refuses to start).
func (f storeFlags) embedded() bool { return f.Store == "sqlite" }

// backend is an event store the service runs on.
type backend interface {
	eventstore.Store
	eventstore.Feed
	Close() error
}

// connectTimeout bounds the first call to KurrentDB or PostgreSQL at startup.
const connectTimeout = 15 * time.Second

// open opens the chosen store. A KurrentDB store is asked for its head once, so that a wrong
// address or credentials stop the start instead of failing every request.
func (f storeFlags) open(ctx context.Context, dataDir string, log *slog.Logger) (backend, error) {
	return f.openWith(ctx, dataDir, log, sqlite.Config{})
}

// openWith is open for the service, whose embedded store reports to the hooks of embedded
// (its group commits and its write-ahead log), for metrics; PostgreSQL's writer reports its
// transactions to embedded.OnBatch too.
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
	case "postgres":
		if f.PostgresURL == "" {
			return nil, errors.New("--store postgres needs --postgres-url (or API_POSTGRES_URL)")
		}
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		return postgres.Open(cctx, f.PostgresURL, postgres.Config{MaxConns: f.PostgresConns,
			StatementTimeout: f.PostgresStatementTimeout, ConnectTimeout: f.PostgresConnectTimeout, OnBatch: embedded.OnBatch})
	default:
		return sqlite.Open(dataDir, embedded)
	}
}
