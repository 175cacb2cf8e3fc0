//go:build !modernc

package sqlite

import (
	"database/sql"
	"net/url"

	"github.com/mattn/go-sqlite3" // cgo SQLite; chosen by measurement, see docs/benchmarks.md
)

const driverName = "sqlite3-orders"

// driverOwnsBlobs: mattn/go-sqlite3 hands out every BLOB as a fresh C.GoBytes copy (its
// SQLiteRows.Next), so readers keep it without copying it again.
const driverOwnsBlobs = true

func init() {
	// Every connection maps the file into memory for reads: a page read is then a memory
	// access instead of a pread system call, which doubled long scans here.
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(`PRAGMA mmap_size = 1073741824`, nil)
		return err
	}})
}

// dsn opens path in WAL mode with the given synchronous setting (see the package doc).
func dsn(path, synchronous string) string {
	return "file:" + url.PathEscape(path) +
		"?_journal_mode=WAL&_synchronous=" + synchronous + "&_busy_timeout=10000&_txlock=immediate&_cache_size=-16000&_stmt_cache_size=16"
}
