package postgres

import (
	"io/fs"
	"sort"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/google/uuid"
)

// An expired stream's row is kept for Config.KeepDeleted past its expiry, then forgotten by
// later writes.
func TestExpiredStreamsAreForgotten(t *testing.T) {
	const keep = 500 * time.Millisecond
	s, err := Open(t.Context(), pgtest.Start(t).NewDatabase(t), Config{KeepDeleted: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventstoretest.ForgetsExpiredStreams(t, s, keep)
}

// Streams written before maximum ages (schema version 2) have none once the schema is brought
// up to date: their events, a day old, read whole, and the stream takes appends as before.
func TestStreamsFromBeforeMaxAgesHaveNone(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	conn := pgtest.Connect(t, url)
	ctx := t.Context()
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if _, err := schemaVersion(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for i, name := range names[:2] {
		if err := applyMigration(ctx, conn, name, i+1); err != nil {
			t.Fatalf("migrate %s: %v", name, err)
		}
	}
	for _, sql := range []string{
		`INSERT INTO streams (name, first_revision, last_revision) VALUES ('old', 0, 0)`,
		`INSERT INTO events (position, id, stream, revision, type, data, recorded)
			VALUES (1, '` + uuid.NewString() + `', 'old', 0, 'test.event.v1', '{}', now() - interval '1 day')`,
		`UPDATE log_head SET position = 1`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := mustOpen(t, url)
	defer s.Close()
	if n := eventstoretest.StreamLen(t, s, "old"); n != 1 {
		t.Errorf("the stream from before reads %d events, want 1", n)
	}
	if res := eventstoretest.MustAppend(t, s, "old", eventstore.Exact(0), eventstoretest.NewEvents(1)...); res.Revision != 1 {
		t.Errorf("append after the migration: revision %d, want 1", res.Revision)
	}
	var none bool
	if err := conn.QueryRow(ctx, `SELECT max_age IS NULL AND expires_at IS NULL FROM streams WHERE name = 'old'`).Scan(&none); err != nil || !none {
		t.Errorf("the stream's row has a maximum age or an expiry (%v)", err)
	}
}
