package command_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"iter"
	"sync"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// feedStore is a store with its global log, as the service runs on.
type feedStore interface {
	eventstore.Store
	eventstore.Feed
}

// forEachFeedStore runs test on the embedded store and on the KurrentDB backend (a test
// server).
func forEachFeedStore(t *testing.T, test func(t *testing.T, s feedStore)) {
	t.Run("Embedded", func(t *testing.T) {
		_, s := newHandler(t)
		test(t, s)
	})
	t.Run("KurrentDB", func(t *testing.T) { test(t, kurrentStore(t)) })
}

// countingStore counts the reads of each stream.
type countingStore struct {
	feedStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	c.mu.Lock()
	c.reads[stream]++
	c.mu.Unlock()
	return c.feedStore.ReadStream(ctx, stream, opts)
}

func (c *countingStore) readsOf(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[stream]
}

// legacyStream is the stream a claim took before claims were per principal.
func legacyStream(customer, ref string) string {
	sum := sha256.Sum256([]byte(customer + "\x00" + ref))
	return command.ClientRefPrefix + hex.EncodeToString(sum[:])
}

// appendLegacyClaim appends a claim as releases before per-principal claims wrote it.
func appendLegacyClaim(t *testing.T, s eventstore.Store, customer, ref, orderID string) {
	t.Helper()
	data, _ := json.Marshal(map[string]string{"customerId": customer, "clientReference": ref, "orderId": orderID})
	if _, err := s.Append(context.Background(), legacyStream(customer, ref), eventstore.NoStream,
		eventstore.EventData{ID: uuid.New(), Type: command.TypeClientRefClaimed, Data: data}); err != nil {
		t.Fatal(err)
	}
}

func scanLegacy(t *testing.T, h *command.Handler, feed eventstore.Feed) command.LegacyScan {
	t.Helper()
	scan, err := h.ScanLegacyClientRefs(context.Background(), feed)
	if err != nil {
		t.Fatal(err)
	}
	return scan
}

// markerWritten reports whether the store holds the marker of no legacy claims.
func markerWritten(t *testing.T, s eventstore.Store) bool {
	t.Helper()
	for _, err := range s.ReadStream(context.Background(), command.NoLegacyClientRefsStream, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	return false
}

// A new store gets the marker at its first scan, and from then on no create reads a legacy
// claim stream, after a restart too; a create before the scan reads it, as it must while the
// store may hold a legacy claim. Client references stay unique per principal.
func TestNewStoreCreatesReadNoLegacyClaim(t *testing.T) {
	forEachFeedStore(t, func(t *testing.T, s feedStore) {
		ctx := context.Background()
		counted := &countingStore{feedStore: s, reads: map[string]int{}}
		h := &command.Handler{Store: counted}
		scan := scanLegacy(t, h, s)
		if !scan.None || !scan.Written || scan.Claims != 0 || !markerWritten(t, s) {
			t.Fatalf("scan of a new store: %+v, marker written: %v; want none found and the marker written", scan, markerWritten(t, s))
		}
		if _, err := h.Handle(ctx, "o1", withRef("o1", "c-1", "po-1"), as("alice", "k1")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(ctx, "o2", withRef("o2", "c-1", "po-1"), as("alice", "k2")); !errors.Is(err, command.ErrClientRefTaken) {
			t.Errorf("alice's second order with the reference: %v; want ErrClientRefTaken", err)
		}
		restarted := &command.Handler{Store: counted}
		if scan := scanLegacy(t, restarted, s); !scan.None || scan.Written || scan.Claims != 0 {
			t.Errorf("scan after a restart: %+v; want the marker found", scan)
		}
		if _, err := restarted.Handle(ctx, "o3", withRef("o3", "c-1", "po-2"), as("alice", "k3")); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"po-1", "po-2"} {
			if n := counted.readsOf(legacyStream("c-1", ref)); n != 0 {
				t.Errorf("the legacy claim stream of %s was read %d times", ref, n)
			}
		}

		unscanned := &command.Handler{Store: counted}
		if _, err := unscanned.Handle(ctx, "o4", withRef("o4", "c-1", "po-4"), as("alice", "k4")); err != nil {
			t.Fatal(err)
		}
		if n := counted.readsOf(legacyStream("c-1", "po-4")); n != 1 {
			t.Errorf("a create before the scan read its legacy claim stream %d times; want 1", n)
		}
	})
}

// A store that holds a legacy claim never gets the marker: every scan finds the claim, after a
// restart too, and the claim keeps refusing its reference to another order of the principal
// whose order holds it, and to no one else.
func TestLegacyClaimIsScannedForAndKeepsRefusing(t *testing.T) {
	forEachFeedStore(t, func(t *testing.T, s feedStore) {
		ctx := context.Background()
		for restart := range 2 {
			h := &command.Handler{Store: s}
			if restart == 0 {
				// alice's order o1 from before claims were per principal, with a newer order
				// of bob's (a per-principal claim) after it.
				appendLegacyClaim(t, s, "c-1", "po-1", "o1")
				created(t, h, "alice", "o1")
				if _, err := h.Handle(ctx, "b1", withRef("b1", "c-9", "po-9"), as("bob", "b1")); err != nil {
					t.Fatal(err)
				}
			}
			scan := scanLegacy(t, h, s)
			if scan.None || scan.Written || scan.Legacy == nil || scan.Legacy.Stream != legacyStream("c-1", "po-1") {
				t.Fatalf("scan %d of a store with a legacy claim: %+v; want the claim found", restart, scan)
			}
			if markerWritten(t, s) {
				t.Fatalf("scan %d wrote the marker on a store with a legacy claim", restart)
			}
			id := []string{"o2", "o3"}[restart]
			if _, err := h.Handle(ctx, id, withRef(id, "c-1", "po-1"), as("alice", "new-"+id)); !errors.Is(err, command.ErrClientRefTaken) {
				t.Errorf("after %d restarts, alice's new order with the reference of her legacy claim: %v; want ErrClientRefTaken", restart, err)
			}
			other := []string{"bob", "carol"}[restart]
			if _, err := h.Handle(ctx, other+id, withRef(other+id, "c-1", "po-1"), as(other, id)); err != nil {
				t.Errorf("after %d restarts, %s's order with the reference of alice's legacy claim: %v", restart, other, err)
			}
		}
	})
}

// A store of an earlier release whose claims are all per principal gets the marker once its
// claims are scanned; two nodes scanning at once both end with it, written once.
func TestStoreWithoutLegacyClaimsGetsTheMarker(t *testing.T) {
	forEachFeedStore(t, func(t *testing.T, s feedStore) {
		ctx := context.Background()
		old := &command.Handler{Store: s}
		for _, id := range []string{"o1", "o2", "o3"} {
			if _, err := old.Handle(ctx, id, withRef(id, "c-1", "po-"+id), as("alice", id)); err != nil {
				t.Fatal(err)
			}
		}
		nodes := []*command.Handler{{Store: s}, {Store: s}}
		scans := make([]command.LegacyScan, len(nodes))
		var wg sync.WaitGroup
		for i, h := range nodes {
			wg.Go(func() { scans[i] = scanLegacy(t, h, s) })
		}
		wg.Wait()
		for i, scan := range scans {
			if !scan.None || scan.Legacy != nil {
				t.Errorf("node %d: %+v; want no legacy claim", i, scan)
			}
			if scan.Written && scan.Claims != 3 {
				t.Errorf("node %d wrote the marker after scanning %d claims; want 3", i, scan.Claims)
			}
		}
		n := 0
		for _, err := range s.ReadStream(ctx, command.NoLegacyClientRefsStream, eventstore.ReadStreamOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Errorf("the marker stream holds %d events; want 1", n)
		}
		if _, err := nodes[1].Handle(ctx, "o4", withRef("o4", "c-1", "po-o1"), as("alice", "o4")); !errors.Is(err, command.ErrClientRefTaken) {
			t.Errorf("alice's order with the reference of her order o1: %v; want ErrClientRefTaken", err)
		}
	})
}
