package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// With the events table held locked by another session, creates that come while the node's
// transaction waits for it are answered 503 with Retry-After within about one
// --postgres-statement-timeout of being sent, strictly less than two (what waiting out the
// transaction before them and then their own took), and created once the lock is released.
func TestPostgresLockedTableAnswersWithinTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	url := pgtest.Start(t).NewDatabase(t)
	s := startServer(t, "", "--store", "postgres", "--postgres-url", url, "--postgres-statement-timeout", timeout.String())
	s.create(t, "locked-before", "c-locked")
	tx, err := connectPG(t, url).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	answers := make(chan string, 4)
	send := func(key string) {
		start := time.Now()
		r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: key, body: orderFor("c-locked")})
		took := time.Since(start)
		switch {
		case err != nil:
			answers <- err.Error()
		case r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "":
			answers <- fmt.Sprintf("%v; want 503 with Retry-After", r)
		case took >= timeout*7/4:
			answers <- fmt.Sprintf("%s answered after %v; want within the statement timeout %v", key, took, timeout)
		default:
			answers <- ""
		}
	}
	go send("locked-first")
	time.Sleep(100 * time.Millisecond) // for the first's transaction to wait for the table
	for i := range 3 {
		go send(fmt.Sprintf("locked-behind-%d", i))
	}
	for range 4 {
		if msg := <-answers; msg != "" {
			t.Error(msg)
		}
	}

	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.create(t, "locked-after", "c-locked")
}

// connectPG opens a connection of the test's own to the database at url.
func connectPG(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
