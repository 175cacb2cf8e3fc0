package sqlite

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"time"
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
	return OpenDBWith(path, DBConfig{})
}

// DBConfig tunes a database opened with OpenDBWith. The zero DBConfig is OpenDB's.
type DBConfig struct {
	// Writeback is how often the kernel is asked to start writing the database's file and
	// its WAL, so that a checkpoint's syncs do not hold the event store's commits (see
	// writeback); 0 means DefaultWriteback, a negative value never.
	Writeback time.Duration
}

// OpenDBWith is OpenDB tuned by cfg.
func OpenDBWith(path string, cfg DBConfig) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	c, err := connector(dsn(path, "NORMAL", commitCacheKiB))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// The writeback stops when the database closes, after its idle connections (database/sql
	// closes a Connector that is an io.Closer last).
	db := sql.OpenDB(writebackConnector{c, startWriteback(cfg.Writeback, path, path+"-wal")})
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

// writebackConnector is a connector that stops a writeback when its database closes.
type writebackConnector struct {
	driver.Connector
	w *writeback
}

func (c writebackConnector) Close() error {
	c.w.Close()
	return nil
}
