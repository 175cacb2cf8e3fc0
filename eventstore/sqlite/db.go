package sqlite

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// OpenDB opens (creating if needed) a SQLite database file other than the event store's: for
// read models, which live beside the events but not in their file. It is here so that this
// package stays the only importer of a SQLite driver.
//
// It runs in WAL mode with synchronous=NORMAL: a commit is atomic but not synced, so a power
// cut may lose the last commits. That is right for read models whose checkpoint commits with
// their rows: they fall back together to an earlier checkpoint and the events are applied
// again, exactly once. It saves an fsync per batch.
func OpenDB(path string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName, dsn(path, "NORMAL"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Each connection holds about two files open: bounded, so that concurrent reads up to the
	// server's connection limit cannot run the process out of file descriptors; a read past
	// it waits for a connection.
	db.SetMaxOpenConns(MaxDBConns)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// MaxDBConns bounds the connections of a database opened with OpenDB.
const MaxDBConns = 32
