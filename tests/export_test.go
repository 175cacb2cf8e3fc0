package tests

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/sqlite"
)

// exportedIDs is the order ids in the orders table of an exported file.
func exportedIDs(t *testing.T, file string) []string {
	t.Helper()
	db, err := sqlite.OpenDB(file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id FROM orders ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// An export as of a time between two batches of commands holds the first batch only, and so
// does one as of the log position of the first batch's last command; the live read models
// keep both.
func TestExportAsOf(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	var first []string
	var firstPos string
	for _, c := range []string{"c-exp-1", "c-exp-2"} {
		id, _ := s.create(t, "exp-"+c, c)
		s.pay(t, id, "pay-"+c)
		firstPos = s.order(t, id).header.Get("Log-Position")
		first = append(first, id)
	}
	time.Sleep(20 * time.Millisecond) // recorded times on both sides of between
	between := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	second, _ := s.create(t, "exp-c-exp-3", "c-exp-3")
	s.pay(t, second, "pay-c-exp-3")
	slices.Sort(first)

	dir := t.TempDir()
	for _, asOf := range []string{between.Format(time.RFC3339Nano), firstPos} {
		out := filepath.Join(dir, "orders-"+strings.NewReplacer(":", "", ".", "").Replace(asOf)+".db")
		printed, err := runBinary("projections", "export", "orders", "--as-of", asOf, "--out", out, "--data", s.dir)
		if err != nil {
			t.Fatalf("projections export --as-of %s: %v", asOf, err)
		}
		if got := exportedIDs(t, out); !slices.Equal(got, first) {
			t.Errorf("export as of %s holds %v; want the first batch %v (printed %q)", asOf, got, first, printed)
		}
		if _, err := runBinary("projections", "export", "orders", "--as-of", asOf, "--out", out, "--data", s.dir); err == nil {
			t.Errorf("a second export into %s: no error; want it refused", out)
		}
	}

	// The sales model as of the same time: the first batch's two payments.
	out := filepath.Join(dir, "sales.db")
	if _, err := runBinary("projections", "export", "sales", "--as-of", between.Format(time.RFC3339Nano), "--out", out, "--data", s.dir); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(out)
	if err != nil {
		t.Fatal(err)
	}
	var paid int
	if err := db.QueryRow(`SELECT coalesce(sum(orders_paid), 0) FROM sales`).Scan(&paid); err != nil || paid != 2 {
		t.Errorf("sales as of %s: %d orders paid (%v); want 2", between, paid, err)
	}
	db.Close()

	r := s.do(t, "GET", "/v1/orders?limit=500", "", nil)
	if n := len(r.json["orders"].([]any)); n != 3 {
		t.Errorf("the live orders model lists %d orders after the exports; want 3", n)
	}
	if _, err := runBinary("projections", "export", "orders", "--as-of", "yesterday", "--out", filepath.Join(dir, "x.db"), "--data", s.dir); err == nil ||
		!strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("--as-of yesterday: %v; want it refused", err)
	}
}
