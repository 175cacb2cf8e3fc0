package order_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
)

// TestUpcastGolden pins every earlier version as it was stored (testdata/earlier/, never
// rewritten) and the current event it reads as: the upcasters' defaults are part of the format.
func TestUpcastGolden(t *testing.T) {
	at := time.Date(2026, 7, 11, 8, 30, 15, 123456789, time.UTC)
	want := map[string]order.Event{
		"order.created.v1": order.Created{OrderID: "01JZ8Q4M6W3Y5T7V9X1B3D5F7H", CustomerID: "cus-42", Currency: "EUR",
			ClientRef: "PO 2026-0711", Channel: order.ChannelUnrecorded, At: at},
		"order.line-added.v1": order.LineAdded{SKU: "BOOK-123", Quantity: 2, UnitPrice: eur(1299), At: at},
	}
	var types []string
	for typ, e := range want {
		types = append(types, typ)
		data, err := os.ReadFile(filepath.Join("testdata", "earlier", typ+".json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := order.Unmarshal(typ, data)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", typ, err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("%s upcasts to (-want +got):\n%s", typ, diff)
		}
		typ2, data2, err := order.Upcast(typ, data)
		if err != nil || typ2 != e.EventType() {
			t.Fatalf("Upcast(%s) = %s, %v; want %s", typ, typ2, err, e.EventType())
		}
		if again, err := order.Unmarshal(typ2, data2); err != nil || !cmp.Equal(again, e) {
			t.Errorf("Upcast(%s) encodes %s, which decodes to %#v, %v", typ, data2, again, err)
		}
	}
	slices.Sort(types)
	if diff := cmp.Diff(order.Events().EarlierTypes(), types); diff != "" {
		t.Errorf("earlier versions without a golden file (-codec +tested):\n%s", diff)
	}
}

// A current event is given back by Upcast byte for byte: only earlier versions are re-encoded.
func TestUpcastKeepsCurrentEvents(t *testing.T) {
	data := []byte(`{"reason":"r",  "at":"2026-01-02T03:04:05Z"}`)
	typ, got, err := order.Upcast("order.cancelled.v1", data)
	if err != nil || typ != "order.cancelled.v1" || string(got) != string(data) {
		t.Errorf("Upcast = %s, %s, %v; want the stored bytes", typ, got, err)
	}
}

// Events the build cannot read are errors that say why, never skipped.
func TestUnreadableEvents(t *testing.T) {
	for _, c := range []struct {
		typ, data string
		want      error
		says      string
	}{
		{"order.teleported.v1", `{}`, order.ErrUnknownEventType, `"order.teleported.v1"`},
		{"order.created.v3", `{"orderId":"o"}`, order.ErrNewerEventVersion, "order.created.v2"},
		{"order.cancelled.v2", `{}`, order.ErrNewerEventVersion, "order.cancelled.v1"},
		{"order.created.v1", `{"customerId":"c","currency":"EUR"}`, order.ErrUpcast, "order.created.v1: no orderId"},
	} {
		_, err := order.Unmarshal(c.typ, []byte(c.data))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Unmarshal(%s, %s) = %v; want %v, saying %q", c.typ, c.data, err, c.want, c.says)
		}
		if _, _, err := order.Upcast(c.typ, []byte(c.data)); !errors.Is(err, c.want) {
			t.Errorf("Upcast(%s, %s) = %v; want %v", c.typ, c.data, err, c.want)
		}
	}
}

// BenchmarkUnmarshalCreated decodes an order.created event stored at the current version and
// at the earlier one, which is upcast: the price of upcasting on every read.
func BenchmarkUnmarshalCreated(b *testing.B) {
	stored := map[string]string{
		"current": "order.created.v2",
		"earlier": "order.created.v1",
	}
	for _, name := range []string{"current", "earlier"} {
		typ := stored[name]
		dir := "testdata"
		if name == "earlier" {
			dir = filepath.Join("testdata", "earlier")
		}
		data, err := os.ReadFile(filepath.Join(dir, typ+".json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := order.Unmarshal(typ, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
