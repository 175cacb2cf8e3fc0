package command_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

func TestOrderIDsSortInDrawOrder(t *testing.T) {
	g := command.NewOrderIDs()
	now := time.Now()
	prev := g.New(now)
	for range 10_000 {
		id := g.New(now) // the same millisecond: only monotonic entropy keeps the order
		if id.Compare(prev) <= 0 {
			t.Fatalf("%s drawn after %s sorts before it", id, prev)
		}
		prev = id
	}
}

// The events of a keyed command get ids derived from the key: two runs of the command, here
// on two stores, append the same ids. They begin with the time in the order's id when that is
// a ULID, and are the version-5 hash otherwise; the golden ids hold the derivation still,
// since changing it stops the store from taking a retry's append for a repeat.
func TestEventIDsDeriveFromTheKey(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ulidID := command.NewOrderIDs().New(at).String()
	for _, tc := range []struct {
		name, orderID string
		golden        []string // nil for a ULID: the ids hold its time, drawn now
	}{
		{"ULID", ulidID, nil},
		{"not a ULID", "o1", []string{"4a4518f0-6d02-5dd2-8460-565cb3455562", "0b39b01c-8b05-5aa9-bfb2-d76b3c422821"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs [2][]eventstore.RecordedEvent
			for i := range runs {
				h, s := newHandler(t)
				if _, err := h.Handle(context.Background(), tc.orderID, create(tc.orderID), keyed("k1", "fp1")); err != nil {
					t.Fatal(err)
				}
				runs[i] = streamEvents(t, s, tc.orderID)
			}
			if tc.golden != nil && len(runs[0]) != len(tc.golden) {
				t.Fatalf("%d events, want %d", len(runs[0]), len(tc.golden))
			}
			for j, e := range runs[0] {
				id := e.ID
				if id != runs[1][j].ID {
					t.Errorf("event %d: id %s in one run, %s in the other", j, id, runs[1][j].ID)
				}
				if id.Variant() != uuid.RFC4122 {
					t.Errorf("event %d: id %s has variant %v", j, id, id.Variant())
				}
				if tc.golden == nil {
					u := ulid.MustParse(ulidID)
					if id.Version() != 8 || !bytes.Equal(id[:6], u[:6]) {
						t.Errorf("event %d: id %s, want version 8 starting with the order id's time %x", j, id, u[:6])
					}
					continue
				}
				if id.String() != tc.golden[j] {
					t.Errorf("event %d: id %s, want %s", j, id, tc.golden[j])
				}
			}
		})
	}
}
