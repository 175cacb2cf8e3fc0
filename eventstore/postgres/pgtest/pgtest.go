// Package pgtest starts a throwaway PostgreSQL server for a package's tests and gives each
// test a database of its own.
//
// The server is started once per test binary, by the first call of Start, from the initdb and
// pg_ctl found on PATH or else under /usr/lib/postgresql/*/bin (Debian's postgresql package),
// in a temporary directory of its own, listening on a free port of 127.0.0.1 with trust
// authentication. Running as root, it runs them as the postgres user, as PostgreSQL refuses
// root. Main stops it and removes the directory once the tests have run, so a package that
// uses Start calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Without the binaries, Start skips the test, naming the package that installs them, or
// fails it under CI (internal/testenv).
//
// The server is for tests only: fsync is off, so a crash of the machine may lose its data. A
// test binary killed before Main returns (a -timeout panic) leaves it running, with its
// directory (orders-pgtest-*) in the temporary directory.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/internal/testenv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// installPostgres installs the initdb and pg_ctl that Start looks for.
const installPostgres = "apt-get install postgresql"

// Server is a running throwaway PostgreSQL server.
type Server struct {
	cluster *cluster
	admin   *pgxpool.Pool // on the postgres database, to create and drop the tests' databases
	next    atomic.Int64  // numbers the tests' databases
}

var (
	mu      sync.Mutex
	inMain  bool
	once    sync.Once
	started *Server
	failure error // why the server did not start
)

// Main runs the tests of m and then stops the server, if Start started one, and removes its
// directory. It returns m.Run's exit code, for os.Exit.
func Main(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	if started != nil {
		if err := started.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start returns the test binary's server, starting it at the first call. It fails the test if
// the server does not start, or if the package's TestMain does not call Main (which stops it).
func Start(tb testing.TB) *Server {
	tb.Helper()
	mu.Lock()
	ok := inMain
	mu.Unlock()
	if !ok {
		tb.Fatal("pgtest: Start needs the package's TestMain to call pgtest.Main, which stops the server: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	once.Do(func() { started, failure = start(context.Background()) })
	switch {
	case errors.Is(failure, errNoBinaries):
		testenv.Missing(tb, "PostgreSQL's server", installPostgres)
	case failure != nil:
		tb.Fatalf("pgtest: %v", failure)
	}
	return started
}

// start starts the cluster and connects to its postgres database.
func start(ctx context.Context, settings ...string) (*Server, error) {
	c, err := startCluster(ctx, settings)
	if err != nil {
		return nil, err
	}
	admin, err := pgxpool.New(ctx, c.url("postgres"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("connect to the server: %w", err), c.stop())
	}
	return &Server{cluster: c, admin: admin}, nil
}

func (s *Server) stop() error {
	s.admin.Close()
	return s.cluster.stop()
}

// NewDatabase creates a database of its own for the test and returns its URL. The database is
// dropped when the test ends, after the cleanups registered after this call: close what
// connects to it in one of those.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test_%d", s.next.Add(1))
	ctx := context.Background()
	if _, err := s.admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		// FORCE: a connection the test left open must not keep the database.
		if _, err := s.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.cluster.url(name)
}

// StartOwn starts a server of the test's own, apart from the test binary's, for a test that
// stops and starts it (Kill, Restart) or that needs settings of its own (name=value, such as
// "fsync=on" for a benchmark of commits); it is stopped and removed when the test ends. It
// fails or skips the test as Start does.
func StartOwn(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	s, err := start(context.Background(), settings...)
	switch {
	case errors.Is(err, errNoBinaries):
		testenv.Missing(tb, "PostgreSQL's server", installPostgres)
	case err != nil:
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// Kill stops the server at once (pg_ctl stop -m immediate), as a crash of the database would:
// its connections break, and it recovers what was committed when it starts again.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	if err := s.cluster.kill(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// Restart starts the server again after Kill, on the same port and data.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.cluster.startOnPort(context.Background()); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// Connect opens a connection of the test's own to the database at url, closed when the test
// ends.
func Connect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// SetReadOnly makes the server of conn read-only by default, or not, as a failover tool does
// to a demoted primary, and has every session take it up (pg_reload_conf). It may run in
// cleanups, where the test's context has ended.
func SetReadOnly(tb testing.TB, conn *pgx.Conn, on bool) {
	tb.Helper()
	set := `ALTER SYSTEM RESET default_transaction_read_only`
	if on {
		set = `ALTER SYSTEM SET default_transaction_read_only = on`
	}
	for _, sql := range []string{set, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			tb.Fatalf("%s: %v", sql, err)
		}
	}
}
