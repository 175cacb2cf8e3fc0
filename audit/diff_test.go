package audit

import (
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
)

// A finding names each field that differs with both values; fields are compared by their own
// Equal where they have one, so one instant in two time zones, or one list of charges built
// twice, is no difference.
func TestFieldDiffNamesTheFieldsThatDiffer(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	charge := order.Charge{PaymentID: "p-2", Amount: order.Money{Amount: 500, Currency: "EUR"}, At: at}
	fold := order.State{ID: "o-1", Currency: "EUR", Status: order.StatusPaid, Total: order.Money{Amount: 2500, Currency: "EUR"},
		DuplicateCharges: order.NewCharges(charge), Version: 4, UpdatedAt: at}
	row := fold
	row.UpdatedAt = at.In(time.FixedZone("CET", 3600))
	row.DuplicateCharges = order.NewCharges(charge)
	if d := fieldDiff(fold, row); d != "" {
		t.Errorf("fieldDiff of equal states: %q; want none", d)
	}
	row.Status, row.Total.Amount, row.ClientRef, row.Lines = order.StatusShipped, 1, "ref-1", []order.Line{}
	want := `ClientRef: "", found "ref-1"; Status: paid, found shipped; Lines: nil, found []; Total: 2500 EUR, found 1 EUR`
	if d := fieldDiff(fold, row); d != want {
		t.Errorf("fieldDiff:\n got %s\nwant %s", d, want)
	}
}

// An event's changes are named as the document names them, with its values' JSON text; a
// member that appears or goes is a change from or to nothing.
func TestJSONChangesNameTheMembersThatDiffer(t *testing.T) {
	before := []byte(`{"id":"o-1","status":"created","total":2500,"paymentId":"p-1","lines":[{"sku":"a"}],"updatedAt":"2026-11-29T10:00:00Z"}`)
	after := []byte(`{"id":"o-1", "status":"paying","total":2500,"lines":[ {"sku":"a"} ],"carrier":"dhl","updatedAt":"2026-11-29T10:05:00Z"}`)
	got, err := JSONChanges(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{"status", `"created"`, `"paying"`},
		{"carrier", "", `"dhl"`},
		{"updatedAt", `"2026-11-29T10:00:00Z"`, `"2026-11-29T10:05:00Z"`},
		{"paymentId", `"p-1"`, ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("JSONChanges:\n got %q\nwant %q", got, want)
	}
	for _, bad := range []string{`[1]`, `{"a":`, ``} {
		if _, err := JSONChanges([]byte(bad), after); err == nil {
			t.Errorf("JSONChanges of %q: no error", bad)
		}
	}
}
