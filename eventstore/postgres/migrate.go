package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// The advisory lock keys of the store. PostgreSQL has one space of advisory locks per
// database: an application that shares the database must not take these keys.
const (
	// migrateLockKey is held, at session level, while a process migrates the schema.
	migrateLockKey int64 = 0x6f72_6465_7273_0001 // "orders" 1
	// writeLockKey is held, at transaction level, by every transaction that writes events
	// (see the package documentation).
	writeLockKey int64 = 0x6f72_6465_7273_0002 // "orders" 2
)

// migrate applies the embedded migrations that orders_schema_version says are missing, each
// in a transaction with its version, holding migrateLockKey so that processes that open the
// database at once wait for each other instead of creating the tables twice.
func migrate(ctx context.Context, pool *pgxpool.Pool) (err error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("lock the schema: %w", err)
	}
	defer func() {
		// A session lock outlives a failed unlock: close the connection rather than hand it
		// back to the pool still holding the lock.
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey); uerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	version, err := schemaVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	for i := version; i < len(names); i++ {
		if err := applyMigration(ctx, conn.Conn(), names[i], i+1); err != nil {
			return fmt.Errorf("migrate %s: %w", names[i], err)
		}
	}
	return nil
}

// schemaVersion returns the last migration applied, creating the table that records it.
func schemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders_schema_version (
		version int PRIMARY KEY,
		applied timestamptz NOT NULL DEFAULT now()
	)`)
	if err != nil {
		return 0, fmt.Errorf("create orders_schema_version: %w", err)
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM orders_schema_version`).Scan(&version); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}

// applyMigration runs the script name and records version, all or nothing.
func applyMigration(ctx context.Context, conn *pgx.Conn, name string, version int) error {
	script, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, string(script)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO orders_schema_version (version) VALUES ($1)`, version)
		return err
	})
}
