package order_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEvents has one event of every type, with every field set, so that the golden files
// show every field's JSON name.
func goldenEvents() []order.Event {
	at := time.Date(2026, 7, 11, 8, 30, 15, 123456789, time.UTC)
	return []order.Event{
		order.Created{OrderID: "01JZ8Q4M6W3Y5T7V9X1B3D5F7H", CustomerID: "cus-42", Currency: "EUR", ClientRef: "PO 2026-0711", Channel: "web", At: at},
		order.LineAdded{SKU: "BOOK-123", Name: "The Go Programming Language", Quantity: 2, UnitPrice: eur(1299), At: at},
		order.LineQuantityChanged{SKU: "BOOK-123", Quantity: 3, At: at},
		order.LineRemoved{SKU: "BOOK-123", At: at},
		order.PaymentStarted{PaymentID: "pay-7", Amount: eur(3897), At: at},
		order.PaymentConfirmed{PaymentID: "pay-7", Amount: eur(3897), At: at},
		order.PaymentFailed{PaymentID: "pay-7", Reason: "card declined", At: at},
		order.Cancelled{Reason: "customer asked", At: at},
		order.Shipped{Carrier: "DHL", TrackingNumber: "JD014600006281230704", At: at},
		order.RefundRequested{RefundID: "ref-3", Amount: eur(1299), At: at},
		order.RefundCompleted{RefundID: "ref-3", Amount: eur(1299), At: at},
		order.DuplicateChargeRecorded{PaymentID: "pay-8", Amount: eur(3897), Reason: order.ChargeAlreadyPaid, At: at},
		order.ProviderEventUnapplied{Provider: "stripe", EventID: "evt_1", Type: "payment_intent.payment_failed", Reason: "no payment is in progress", At: at},
	}
}

// TestGolden pins the stored form of every event type: a renamed type or field shows up as a
// diff of testdata/ in review. Run `go test ./domain/order -update` after an intended change.
func TestGolden(t *testing.T) {
	var types []string
	for _, e := range goldenEvents() {
		typ, data, err := order.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", e, err)
		}
		types = append(types, typ)
		if typ != e.EventType() {
			t.Errorf("Marshal type %q, EventType %q", typ, e.EventType())
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, data, "", "\t"); err != nil {
			t.Fatal(err)
		}
		pretty.WriteByte('\n')
		path := filepath.Join("testdata", typ+".json")
		if *update {
			if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./domain/order -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
			t.Errorf("%s (-golden +encoded):\n%s", path, diff)
		}
		// What is stored must keep decoding to the same event.
		got, err := order.Unmarshal(typ, want)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", path, err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("%s decodes differently (-want +got):\n%s", path, diff)
		}
	}

	slices.Sort(types)
	if diff := cmp.Diff(order.Events().Types(), types); diff != "" {
		t.Errorf("golden events do not cover the codec's types (-codec +golden):\n%s", diff)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if typ := strings.TrimSuffix(filepath.Base(f), ".json"); !slices.Contains(types, typ) {
			t.Errorf("%s: no event type %q; delete the file if the type is gone", f, typ)
		}
	}
}

func TestEventTypeNames(t *testing.T) {
	for _, typ := range order.Events().Types() {
		if !regexp.MustCompile(`^order\.[a-z-]+\.v[1-9][0-9]*$`).MatchString(typ) {
			t.Errorf("event type %q is not order.<name>.v<n>", typ)
		}
	}
}

func TestCodecErrors(t *testing.T) {
	if _, err := order.Unmarshal("order.teleported.v1", []byte(`{}`)); !errors.Is(err, order.ErrUnknownEventType) {
		t.Errorf("unknown type: err = %v, want ErrUnknownEventType", err)
	}
	if _, err := order.Unmarshal("order.created.v1", []byte(`{"orderId":`)); err == nil {
		t.Errorf("truncated JSON decoded without error")
	}
	if _, err := order.Unmarshal("order.created.v1", []byte(`{"orderId":1}`)); err == nil {
		t.Errorf("a number for a string decoded without error")
	}
	for _, e := range []order.Event{nil, &order.Cancelled{Reason: "r"}, (*order.Cancelled)(nil)} {
		if _, _, err := order.Marshal(e); !errors.Is(err, order.ErrUnknownEventType) {
			t.Errorf("Marshal(%#v): err = %v, want ErrUnknownEventType", e, err)
		}
	}
	var zero order.Codec
	if _, _, err := zero.Marshal(order.Cancelled{}); !errors.Is(err, order.ErrUnknownEventType) {
		t.Errorf("zero Codec marshalled an event: %v", err)
	}
	// A reader of v1 tolerates fields a later writer may add.
	e, err := order.Unmarshal("order.cancelled.v1", []byte(`{"reason":"r","at":"2026-01-02T03:04:05Z","note":"new"}`))
	if err != nil || e.(order.Cancelled).Reason != "r" {
		t.Errorf("unknown field: %#v, %v", e, err)
	}
}

// FuzzUnmarshal feeds arbitrary stored data to the decoder: it must not panic, whatever it
// accepts must encode and decode to the same event, and Evolve must fold it without panicking.
// Seeds: the golden events, plus testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	for _, e := range goldenEvents() {
		typ, data, err := order.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(typ, data)
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		e, err := order.Unmarshal(typ, data)
		if err != nil {
			return
		}
		typ2, data2, err := order.Marshal(e)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", e, err)
		}
		if typ2 != typ && !slices.Contains(order.Events().EarlierTypes(), typ) {
			t.Fatalf("decoded as %s, encoded as %s", typ, typ2)
		}
		e2, err := order.Unmarshal(typ2, data2)
		if err != nil {
			t.Fatalf("cannot decode own encoding %s: %v", data2, err)
		}
		if diff := cmp.Diff(e, e2); diff != "" {
			t.Fatalf("round trip changed the event (-first +second):\n%s", diff)
		}
		s := order.Evolve(order.State{}, e)
		order.Evolve(order.Evolve(s, e), e)
	})
}
