package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// A rebuild that compares, with nothing changed in the projections' code, finds every row
// the same; a dry run leaves the live generation, and --swap swaps after comparing.
func TestRebuildCompareFindsNothingChanged(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for i, customer := range []string{"c-cmp-1", "c-cmp-2", "c-cmp-3"} {
		id, _ := s.create(t, "cmp-"+customer, customer)
		if i > 0 {
			s.pay(t, id, "pay-"+customer)
		}
	}
	before := s.waitProjections(t, "caught up", caughtUp)
	base := strings.TrimSuffix(s.url("/"), "/")

	out, err := runBinary("projections", "rebuild", "--dry-run", "--format", "json", "--url", base)
	if err != nil {
		t.Fatalf("projections rebuild --dry-run: %v\n%s", err, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var compared []string
	for {
		var c struct {
			Live, Next, At          int64
			Added, Removed, Changed *int64
			Tables                  []struct{ Table string }
			Samples                 []any
			Swapped                 bool
		}
		if err := dec.Decode(&c); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%v in\n%s", err, out)
		}
		if c.Added == nil || *c.Added != 0 || *c.Removed != 0 || *c.Changed != 0 || len(c.Samples) != 0 || c.Swapped || c.Next != c.Live+1 || c.At == 0 {
			t.Errorf("dry run compared %+v; want 0 added, removed and changed at a position, not swapped", c)
		}
		for _, table := range c.Tables {
			compared = append(compared, table.Table)
		}
	}
	if want := "orders idempotency_keys payments client_references provider_events sales"; strings.Join(compared, " ") != want {
		t.Errorf("compared the tables %v; want %s", compared, want)
	}
	after := s.projections(t)
	for name, p := range after {
		if p.Generation != before[name].Generation || p.Rebuild != nil {
			t.Errorf("projection %s after a dry run: %+v; want generation %d, no rebuild", name, p, before[name].Generation)
		}
	}

	out, err = runBinary("projections", "rebuild", "orders", "--compare", "--swap", "--url", base)
	if err != nil {
		t.Fatalf("projections rebuild --compare --swap: %v\n%s", err, out)
	}
	if !strings.Contains(out, "0 added, 0 removed, 0 changed; swapped it in") || !strings.Contains(out, "TABLE") {
		t.Errorf("projections rebuild orders --compare --swap printed\n%s\nwant the counts, the swap and the table", out)
	}
	if p := s.projections(t)["orders"]; p.Generation != before["orders"].Generation+1 {
		t.Errorf("orders after --compare --swap: %+v; want generation %d", p, before["orders"].Generation+1)
	}
	s.checkRowsAreFolds(t, s.listAll(t, q("limit", "500")))

	// The same options through the admin API, refused when they contradict each other.
	for _, query := range []string{"dryRun=true&swap=true", "compare=yes"} {
		checkProblem(t, s.doInvalid(t, "POST", "/admin/projections/orders/rebuild?"+query, "", nil), 400, "malformed-request")
	}
	if _, err := runBinary("projections", "rebuild", "--dry-run", "--swap", "--url", base); err == nil || !bytes.Contains([]byte(err.Error()), []byte("--dry-run never swaps")) {
		t.Errorf("--dry-run --swap: %v; want it refused", err)
	}
}
