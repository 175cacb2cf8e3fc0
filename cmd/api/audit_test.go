package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"
)

// created is when seedOrder's order was created, by the command handler's clock; its payment
// started an hour later. The store records both events at its own time.
var created = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// seedOrder writes one order as the service would, into a new data directory: created with a
// line (revisions 0 and 1) at created, its payment started (revision 2) an hour later.
func seedOrder(t *testing.T) (dir, id string) {
	t.Helper()
	dir = t.TempDir()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := created
	h := &command.Handler{Store: s, Now: func() time.Time { return now }}
	id = ulid.Make().String()
	eur := func(n int64) order.Money { return order.Money{Amount: n, Currency: "EUR"} }
	ctx := context.Background()
	create := order.CreateOrder{OrderID: id, CustomerID: "c-1", Currency: "EUR",
		Lines: []order.AddLine{{SKU: "book", Quantity: 2, UnitPrice: eur(1250)}}}
	if _, err := h.Handle(ctx, id, create, command.Metadata{Principal: "shop-1", IdempotencyKey: "create-1"}, command.NewOrder()); err != nil {
		t.Fatal(err)
	}
	now = created.Add(time.Hour)
	if _, err := h.Handle(ctx, id, order.StartPayment{PaymentID: "pay-1", Amount: eur(2500)}, command.Metadata{Principal: "shop-1", IdempotencyKey: "pay-1"}); err != nil {
		t.Fatal(err)
	}
	return dir, id
}

func TestAuditStateFormats(t *testing.T) {
	dir, id := seedOrder(t)

	r := runCLI(t, "audit", "state", id, "--data", dir, "--revision", "1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"ORDER", id, "STATUS", "created", "TOTAL", "2500", "book"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table:\n%s\nwant %q in it", r.stdout, want)
		}
	}

	// JSON is GET /v1/orders/{id}/state's body: the API's names and its status words.
	// --at is compared with the store's clock, which recorded the events just now.
	r = runCLI(t, "audit", "state", id, "--data", dir, "--at", time.Now().Add(time.Hour).Format(time.RFC3339), "--format", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	want := map[string]any{"revision": 2.0, "order": map[string]any{
		"id": id, "customerId": "c-1", "currency": "EUR", "channel": "api", "status": "paying",
		"lines": []any{map[string]any{"sku": "book", "quantity": 2.0, "unitPrice": 1250.0}},
		"total": 2500.0, "paid": 0.0, "refunded": 0.0, "paymentId": "pay-1", "version": 3.0,
		"createdAt": created.Format(time.RFC3339), "updatedAt": created.Add(time.Hour).Format(time.RFC3339),
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("audit state --format json (-want +got):\n%s", d)
	}
}

func TestAuditStatePoint(t *testing.T) {
	dir, id := seedOrder(t)
	help := runCLI(t, "audit", "state", "--help")
	if !strings.Contains(help.stdout, "give exactly one") || !strings.Contains(help.stdout, "--revision=N") || !strings.Contains(help.stdout, "--at=TIME") {
		t.Errorf("help does not show --revision and --at as alternatives:\n%s", help.stdout)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{id, "--revision", "1", "--at", created.Format(time.RFC3339)}, "--revision and --at can't be used together"},
		{"neither", []string{id}, "--revision N or --at TIME"},
		{"not a time", []string{id, "--at", "yesterday"}, `--at: want an RFC 3339 time such as 2026-11-29T12:00:00Z, not "yesterday"`},
		{"unknown order", []string{"NOPE", "--revision", "0"}, "order NOPE not found"},
		{"unknown order at a time", []string{"NOPE", "--at", created.Format(time.RFC3339)}, "order NOPE not found"},
		{"before it existed", []string{id, "--at", created.Add(-time.Minute).Format(time.RFC3339)}, "order " + id + " did not exist at 2026-11-29T11:59:00Z"},
		{"past its last revision", []string{id, "--revision", "9"}, "order " + id + " has no revision 9: its last is 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"audit", "state", "--data", dir}, tc.args...)...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %v; want one saying %q", r.err, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("printed %q on an error", r.stdout)
			}
		})
	}
}

func TestAuditHistoryFormats(t *testing.T) {
	dir, id := seedOrder(t)
	history := func(format string) cliRun {
		t.Helper()
		r := runCLI(t, "audit", "history", id, "--data", dir, "--format", format)
		if r.err != nil {
			t.Fatalf("--format %s: %v", format, r.err)
		}
		return r
	}
	if out := history("table").stdout; !strings.HasPrefix(out, "REVISION") || strings.Count(out, "\n") != 4 || !strings.Contains(out, "shop-1") {
		t.Errorf("table:\n%s\nwant a header and 3 events by shop-1", out)
	}
	if out := history("jsonl").stdout; strings.Count(out, "\n") != 3 || !strings.Contains(out, `"stream":"order-`+id+`"`) {
		t.Errorf("jsonl:\n%s\nwant 3 lines", out)
	}
	// json is the API's page of events (GET /v1/orders/{id}/events).
	var page struct {
		Events []struct {
			Revision   uint64         `json:"revision"`
			Type       string         `json:"type"`
			RecordedAt time.Time      `json:"recordedAt"`
			Data       map[string]any `json:"data"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(history("json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 3 || page.Events[2].Revision != 2 || page.Events[0].Type != "order.created.v2" || page.Events[0].Data == nil {
		t.Errorf("json: %+v; want the 3 events of the order", page)
	}

	r := runCLI(t, "audit", "history", "NOPE", "--data", dir)
	if r.err == nil || r.err.Error() != "order NOPE not found" || r.stdout != "" {
		t.Errorf("history of an unknown order: %v, printed %q; want only the error 'order NOPE not found'", r.err, r.stdout)
	}
}

func TestAuditVerifyFormats(t *testing.T) {
	dir, _ := seedOrder(t)
	r := runCLI(t, "audit", "verify", "--data", dir)
	if r.err != nil || !strings.Contains(r.stdout, "verified 3 events") || !strings.Contains(r.stdout, "no findings") {
		t.Errorf("table: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, "audit", "verify", "--data", dir, "--format", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep struct {
		Events   uint64 `json:"events"`
		Streams  int    `json:"streams"`
		Findings []any  `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if rep.Events != 3 || rep.Streams != 1 || rep.Findings == nil || len(rep.Findings) != 0 {
		t.Errorf("json: %+v; want 3 events in 1 stream and an empty list of findings", rep)
	}
}
