//go:build cgo && !modernc

package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/url"
	"strconv"

	"github.com/mattn/go-sqlite3" // cgo SQLite; chosen by measurement, see docs/benchmarks.md
)

const driverName = "sqlite3-orders"

// driverOwnsBlobs: mattn/go-sqlite3 hands out every BLOB as a fresh C.GoBytes copy (its
// SQLiteRows.Next), so readers keep it without copying it again.
const driverOwnsBlobs = true

// Every connection maps the file into memory for reads (a page read is then a memory access
// instead of a pread system call, which doubled long scans here), except the store's readers of
// streams, which turn it off (see Store.rdb). And a connection that commits checkpoints every
// 10,000 pages of WAL (checkpointPages), except the store's writer, which turns that off (see
// Store.checkpointer).
var sqliteDriver = &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
	_, err := c.Exec(`PRAGMA mmap_size = 1073741824; PRAGMA wal_autocheckpoint = `+checkpointPages, nil)
	return err
}}

func init() {
	sql.Register(driverName, sqliteDriver)
}

// connector opens connections to dsn, for sql.OpenDB.
func connector(dsn string) (driver.Connector, error) {
	return dsnConnector{dsn}, nil
}

// dsnConnector is a driver.Connector for sqliteDriver, which has none of its own.
type dsnConnector struct{ dsn string }

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return sqliteDriver.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return sqliteDriver }

// storeOptions are DSN options for the store's own connections. _mutex=no drops SQLite's
// per-connection mutex, which the driver otherwise takes and releases for every column of
// every row (7% of a long read here): each of these connections is used by one goroutine at
// a time, the writer's by the writer, the checkpointer's by the checkpointer, and a reader's
// by the read that took it from the pool.
const storeOptions = "&_mutex=no"

// dsn opens path in WAL mode with the given synchronous setting (see the package doc).
func dsn(path, synchronous string, cacheKiB int) string {
	return "file:" + url.PathEscape(path) +
		"?_journal_mode=WAL&_synchronous=" + synchronous + "&_busy_timeout=10000&_txlock=immediate&_cache_size=-" + strconv.Itoa(cacheKiB) + "&_stmt_cache_size=16"
}
