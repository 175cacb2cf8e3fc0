//go:build linux

package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
)

// openedAs lists this process's descriptors of path, as /proc names their files: a file
// removed since it was opened ends in " (deleted)".
func openedAs(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		name, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.TrimSuffix(name, " (deleted)") == path {
			names = append(names, name)
		}
	}
	return names
}

// eventually waits up to 5 s for ok.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

func TestWritebackFollowsItsFilesAndClosesThem(t *testing.T) {
	dir := t.TempDir()
	db, wal := filepath.Join(dir, "a.db"), filepath.Join(dir, "a.db-wal")
	if err := os.WriteFile(db, []byte("db"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWriteback(time.Millisecond, db, wal)
	eventually(t, "the database file held once", func() bool { return len(openedAs(t, db)) == 1 })
	if got := openedAs(t, wal); len(got) != 0 {
		t.Fatalf("a WAL that does not exist is held: %q", got)
	}

	// A WAL appears, goes (the last connection removes it), and appears again as another file.
	if err := os.WriteFile(wal, []byte("wal"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the WAL held once it exists", func() bool { return len(openedAs(t, wal)) == 1 })
	replaceWAL(t, wal)

	// Another file takes the database's name: the first stays held, as SQLite's locks on it
	// would go with a close of any descriptor of it.
	if err := os.WriteFile(db+".new", []byte("other db"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(db+".new", db); err != nil {
		t.Fatal(err)
	}
	// The WAL replaced once more: once the new one is held, the loop has taken a turn since the
	// rename, and a turn looks at the database file before the WALs.
	replaceWAL(t, wal)
	if got := openedAs(t, db); len(got) != 1 || got[0] != db+" (deleted)" {
		t.Fatalf("after the database file was replaced, held %q, want the first file alone", got)
	}

	w.Close()
	if got := append(openedAs(t, db), openedAs(t, wal)...); len(got) != 0 {
		t.Fatalf("still open after Close: %q", got)
	}
	w.Close() // a second Close is harmless
}

// replaceWAL removes the WAL at path and creates another there, as the last connection to
// close and the next one to write do, and waits until the writeback holds the new one alone.
func replaceWAL(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("new wal"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new WAL held instead of the removed one", func() bool {
		got := openedAs(t, path)
		return len(got) == 1 && got[0] == path
	})
}

func TestWritebackNever(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	if err := os.WriteFile(path, []byte("db"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWriteback(-1, path)
	time.Sleep(20 * time.Millisecond)
	if got := openedAs(t, path); len(got) != 0 {
		t.Fatalf("a negative interval opened %q", got)
	}
	w.Close()
}

// The store and a read-model database leave no file open once closed: their writebacks close
// their descriptors with them, after SQLite's, whose locks a close of any descriptor of the
// file would drop.
func TestClosedDatabasesLeaveNoFileOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Writeback: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eventstoretest.MustAppend(t, s, "s", eventstore.NoStream, eventstoretest.NewEvents(1)...)
	rm := filepath.Join(dir, "readmodels.db")
	db, err := OpenDBWith(rm, DBConfig{Writeback: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, FileName)
	// The read models' idle connection holds their WAL; a second descriptor is the writeback's,
	// whose turns come every millisecond, the store's too.
	eventually(t, "the read models' WAL held by the writeback", func() bool { return len(openedAs(t, rm+"-wal")) >= 2 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{store, store + "-wal", rm, rm + "-wal"} {
		if got := openedAs(t, path); len(got) != 0 {
			t.Errorf("%s still open after Close: %q", path, got)
		}
	}
}
