package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
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
	}, eventstoretest.Options{ExpiredForgottenPerWrite: 64}) // expiredChunk for the write's one request
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

// Every connection of the read models checkpoints at 10,000 pages of WAL, not SQLite's 1,000,
// and has a page cache of 4,000 KiB (see commitCacheKiB).
func TestReadModelsCheckpointEvery10000PagesWithASmallCache(t *testing.T) {
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
		var cache int
		if err := conns[i].QueryRowContext(context.Background(), `PRAGMA cache_size`).Scan(&cache); err != nil {
			t.Fatal(err)
		}
		if cache != -4000 {
			t.Errorf("connection %d: cache_size = %d, want -4000", i, cache)
		}
	}
}

// The checkpointer copies the WAL into the database file while the store is written, and the
// WAL starts over instead of growing, even though the appends never pause (a copy beside the
// writer alone never catches up with it). Each event is larger than a page: a WAL that never
// started over would hold every byte of them.
func TestCheckpointsStartTheWALOver(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir, sqlite.Config{CheckpointFrames: 1})
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

// A reader that began before a copy of the WAL keeps it from starting over. Once the reader
// ends, the WAL starts over within a few commits, not at the next copy (5 s later here).
func TestWALStartsOverOnceAReaderLetsGo(t *testing.T) {
	dir := t.TempDir()
	polls := make(chan struct{}, 16) // the checkpointer's looks at the WAL (Config.OnWAL)
	s, err := sqlite.Open(dir, sqlite.Config{OnWAL: func(int, int) {
		select {
		case polls <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	appendOne := func() {
		t.Helper()
		_, err := s.Append(ctx, "s", eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "test.v1", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	restarts := func() uint32 { // the WAL header's checkpoint sequence number
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, sqlite.FileName+"-wal"))
		if err != nil || len(b) < 32 {
			t.Fatalf("read the WAL header: %v (%d bytes)", err, len(b))
		}
		return binary.BigEndian.Uint32(b[12:16])
	}

	db, err := sqlite.OpenDB(filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reader, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var n int
	if _, err := reader.ExecContext(ctx, `BEGIN`); err != nil { // deferred: a reader
		t.Fatal(err)
	}
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}

	// The first write: the checkpointer looks at the WAL and copies it at once, the writer's
	// part included, before it looks again a second later.
	appendOne()
	for range 2 {
		select {
		case <-polls:
		case <-time.After(10 * time.Second):
			t.Fatal("the checkpointer did not look at the WAL twice in 10 s")
		}
	}
	appendOne()
	before := restarts()
	if _, err := reader.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		appendOne()
	}
	if after := restarts(); after == before {
		t.Errorf("the WAL did not start over after the reader ended (checkpoint sequence %d)", after)
	}
}

// A read-model database holds a bounded number of connections, and with them of open files.
func TestOpenDBBoundsItsConnections(t *testing.T) {
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Stats().MaxOpenConnections; got != sqlite.MaxDBConns {
		t.Fatalf("MaxOpenConnections = %d, want %d", got, sqlite.MaxDBConns)
	}
}

// A deleted stream's row is kept for Config.KeepDeleted, then forgotten by later deletes.
func TestDeletedStreamsAreForgotten(t *testing.T) {
	const keep = 500 * time.Millisecond
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{KeepDeleted: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventstoretest.ForgetsDeletedStreams(t, s, keep)
}

// An expired stream's row is kept for Config.KeepDeleted past its expiry, then forgotten by
// later writes.
func TestExpiredStreamsAreForgotten(t *testing.T) {
	const keep = 500 * time.Millisecond
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{KeepDeleted: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventstoretest.ForgetsExpiredStreams(t, s, keep)
}
