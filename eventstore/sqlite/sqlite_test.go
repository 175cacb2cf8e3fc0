package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
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

// Every connection of the read models checkpoints at the same size of WAL (the store's writer
// leaves its checkpoints to the checkpointer).
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

// The checkpointer copies the WAL into the database file while the store is written, and the
// WAL starts over instead of growing, even though the appends never pause (a copy beside the
// writer alone never catches up with it). Each event is larger than a page: a WAL that never
// started over would hold every byte of them.
func TestCheckpointsStartTheWALOver(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir, sqlite.Config{CheckpointEvents: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := []byte(`{"pad":"` + strings.Repeat("x", 20_000) + `"}`)
	events := 0
	for start := time.Now(); time.Since(start) < 5*time.Second; events++ {
		_, err := s.Append(ctx, "big", eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "test.v1", Data: data})
		if err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, sqlite.FileName+"-wal"))
	if err != nil {
		t.Fatal(err)
	}
	if written := int64(events * len(data)); fi.Size() >= written {
		t.Errorf("WAL of %d bytes after %d bytes of events: it never started over", fi.Size(), written)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = MustOpen(t, dir)
	defer s.Close()
	n := 0
	for _, err := range s.ReadStream(ctx, "big", eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != events {
		t.Errorf("%d events after reopening, want %d", n, events)
	}
}
