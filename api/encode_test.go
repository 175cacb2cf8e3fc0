package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acme/orders/jsonenc/jsonenctest"
)

// An order's answer is stored and replayed byte for byte: its encoder writes what
// encoding/json writes, for every field empty or not, any string, and lines and charges none,
// empty or many.
func TestOrderViewIsEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	gen := jsonenctest.NewValues(r, 300)
	pick, num, at := gen.String, gen.Int, gen.Time
	var views, lines, charges jsonenctest.Fields
	defer func() { views.Check(t); lines.Check(t); charges.Check(t) }()
	for i := range 3000 {
		v := orderView{ID: pick(), CustomerID: pick(), Currency: pick(), ClientReference: pick(), Channel: pick(), Status: pick(),
			Total: num(), Paid: num(), Refunded: num(), PaymentID: pick(), RefundID: pick(), Carrier: pick(), TrackingNumber: pick(),
			DuplicateChargeCount: int(num() % 1000), DuplicateChargeTotal: num(), DuplicateChargeEvents: pick(),
			Version: num(), CreatedAt: at(), UpdatedAt: at()}
		if i%5 != 0 {
			v.Lines = make([]lineView, r.IntN(4))
		}
		for j := range v.Lines {
			v.Lines[j] = lineView{SKU: pick(), Name: pick(), Quantity: num(), UnitPrice: num()}
			lines.Note(v.Lines[j])
		}
		if i%3 == 0 {
			v.DuplicateCharges = make([]chargeView, r.IntN(3))
		}
		for j := range v.DuplicateCharges {
			v.DuplicateCharges[j] = chargeView{PaymentID: pick(), Amount: num(), Reason: pick()}
			charges.Note(v.DuplicateCharges[j])
		}
		views.Note(v)
		want, _ := json.Marshal(v)
		if got, err := v.appendJSON(nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v:\n got %s (%v)\nwant %s", v, got, err, want)
		}
	}
}

// BenchmarkOrderAnswer encodes a create's answer as respond does (append) and as
// encoding/json did (encoding-json).
func BenchmarkOrderAnswer(b *testing.B) {
	now := time.Now()
	v := orderView{ID: "01JDQ2Z8V3M1K4Y6T9B2C5N7PX", CustomerID: "c-000123", Currency: "EUR", Channel: "api", Status: "pending",
		Lines: []lineView{{SKU: "sku-1", Quantity: 2, UnitPrice: 1000}, {SKU: "sku-2", Quantity: 1, UnitPrice: 500}},
		Total: 2500, Version: 1, CreatedAt: now, UpdatedAt: now}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body, _ := json.Marshal(v)
			_ = string(body) + "\n"
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body, _ := v.appendJSON(make([]byte, 0, 512+64*len(v.Lines)))
			_ = string(append(body, '\n'))
		}
	})
}
