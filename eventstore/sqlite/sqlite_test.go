package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/sqlite"
)

func TestConformance(t *testing.T) {
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) eventstoretest.Backend {
			return MustOpen(t, dir)
		}
	}, eventstoretest.Options{})
}

// MustOpen opens a store in dir; the caller closes it.
func MustOpen(tb testing.TB, dir string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Every connection that may commit, the read models' as well as the store's writer, checkpoints
// at the same size of WAL.
func TestReadModelsCheckpointLikeTheStore(t *testing.T) {
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	conns := make([]*sql.Conn, 2) // two connections, so that both are seen
	for i := range conns {
		if conns[i], err = db.Conn(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
		var pages int
		if err := conns[i].QueryRowContext(context.Background(), `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
			t.Fatal(err)
		}
		if pages != 10000 {
			t.Errorf("connection %d: wal_autocheckpoint = %d, want 10000", i, pages)
		}
	}
}
