package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/postgres/pgtest"
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
	tx, err := pgtest.Connect(t, url).Begin(t.Context())
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

// A failover that leaves the node's database read-only (a demoted primary: ALTER SYSTEM SET
// default_transaction_read_only) makes /readyz 503, naming the reason, while every write is
// refused, and 200 again by itself once the database takes writes.
func TestPostgresReadOnlyDatabaseIsNotReady(t *testing.T) {
	t.Parallel()
	url := pgtest.StartOwn(t).NewDatabase(t) // ALTER SYSTEM is the whole server's
	s := startServer(t, "", "--store", "postgres", "--postgres-url", url)
	s.create(t, "readonly-before", "c-readonly")
	wantStatus(t, s.do(t, "GET", "/readyz", "", nil), http.StatusOK)
	admin := pgtest.Connect(t, url)
	t.Cleanup(func() { pgtest.SetReadOnly(t, admin, false) }) // for the database to be dropped

	pgtest.SetReadOnly(t, admin, true)
	var ready *response
	if !eventually(10*time.Second, func() bool {
		ready = s.do(t, "GET", "/readyz", "", nil)
		return ready.status == http.StatusServiceUnavailable
	}) {
		t.Fatalf("/readyz on a read-only database: %v; want 503", ready)
	}
	checkProblem(t, ready, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(ready.str("detail"), "takes no writes") {
		t.Errorf("/readyz detail %q does not say that the database takes no writes", ready.str("detail"))
	}
	checkProblem(t, s.do(t, "POST", "/v1/orders", "readonly-during", orderFor("c-readonly")), http.StatusServiceUnavailable, "unavailable")

	pgtest.SetReadOnly(t, admin, false)
	if !eventually(10*time.Second, func() bool { return s.do(t, "GET", "/readyz", "", nil).status == http.StatusOK }) {
		t.Error("/readyz once the database takes writes again: still not 200 after 10 s")
	}
	s.create(t, "readonly-after", "c-readonly")
}
