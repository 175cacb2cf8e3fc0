package audit

import (
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
