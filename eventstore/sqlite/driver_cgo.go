//go:build !modernc

package sqlite

import (
	"net/url"

	_ "github.com/mattn/go-sqlite3" // cgo SQLite; chosen by measurement, see docs/benchmarks.md
)

const driverName = "sqlite3"

// dsn opens path in WAL mode with the given synchronous setting (see the package doc).
func dsn(path, synchronous string) string {
	return "file:" + url.PathEscape(path) +
		"?_journal_mode=WAL&_synchronous=" + synchronous + "&_busy_timeout=10000&_txlock=immediate&_cache_size=-16000&_stmt_cache_size=16"
}
