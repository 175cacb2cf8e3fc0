package sqlite

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// OpenDB opens (creating if needed) a SQLite database file other than the event store's, with
// the same durability settings (WAL, synchronous=FULL): for read models, which live beside the
// events but not in their file. It is here so that this package stays the only importer of a
// SQLite driver.
func OpenDB(path string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName, dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}
