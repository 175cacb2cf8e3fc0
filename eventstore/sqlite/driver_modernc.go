//go:build !cgo || modernc

package sqlite

import (
	"database/sql/driver"
	"net/url"
	"strconv"

	"modernc.org/sqlite" // pure-Go SQLite: where cgo is off, or with -tags modernc to compare
)

const driverName = "sqlite"

// driverOwnsBlobs: not established for modernc.org/sqlite, so readers copy.
const driverOwnsBlobs = false

// storeOptions are DSN options for the store's own connections: none here.
const storeOptions = ""

// dsn opens path in WAL mode with the given synchronous setting (see the package doc).
func dsn(path, synchronous string, cacheKiB int) string {
	return "file:" + url.PathEscape(path) +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(" + synchronous + ")&_pragma=busy_timeout(10000)" +
		"&_pragma=cache_size(-" + strconv.Itoa(cacheKiB) + ")&_pragma=mmap_size(1073741824)&_pragma=wal_autocheckpoint(" + checkpointPages + ")&_txlock=immediate"
}

// connector opens connections to dsn, for sql.OpenDB.
func connector(dsn string) (driver.Connector, error) {
	return sqlite.NewConnector(dsn)
}
