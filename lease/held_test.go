package lease

import (
	"errors"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// A held stream is renewed at the revision of its last record, truncated to its last record
// after CompactAfter renewals, and lost once another process appends to it.
func TestHeld(t *testing.T) {
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	record := func() eventstore.EventData {
		return eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: "held.v1", Data: []byte(`{}`)}
	}
	h := Held{Store: store, Stream: "held-x", Expected: eventstore.NoStream}
	for range CompactAfter + 2 {
		if renewed, err := h.Renew(ctx, record()); !renewed || err != nil {
			t.Fatal(renewed, err)
		}
	}
	first, _, _ := eventstore.First(ctx, store, "held-x")
	if rev, _ := h.Expected.Revision(); rev != CompactAfter+1 || first.Revision != CompactAfter-1 || h.From.IsZero() {
		t.Errorf("expected %v, first revision %d, from %v; want %d, %d, set", h.Expected, first.Revision, h.From, CompactAfter+1, CompactAfter-1)
	}
	if in := h.RenewIn(3 * time.Second); in <= 0 || in > time.Second {
		t.Errorf("RenewIn(3s) just after a renewal: %v; want within a second", in)
	}
	if _, err := store.Append(ctx, "held-x", h.Expected, record()); err != nil { // another process takes over
		t.Fatal(err)
	}
	renewed, err := h.Renew(ctx, record())
	if renewed || !errors.Is(err, ErrLost) || !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Errorf("after a takeover: renewed %v, %v; want ErrLost", renewed, err)
	}
}
