package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// node is the endpoints of one API node over store.
func node(t *testing.T, store eventstore.Store, max int) *Endpoints {
	t.Helper()
	sealer, err := NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MaxEndpoints, cfg.AllowPrivate = max, true
	return &Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}
}

func registerKey(es *Endpoints, principal, key string) error {
	_, err := register(context.Background(), es, principal, key, "http://127.0.0.1:9/hook", []string{AllEvents}, "")
	return err
}

// Two nodes over one store register endpoints for one client at once: exactly the limit of
// them are registered, every other registration is refused with ErrLimit, and a delete on one
// node frees a slot for the other.
func TestEndpointLimitHoldsAcrossNodes(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) { testEndpointLimitHoldsAcrossNodes(t, open(t)) })
	}
}

func testEndpointLimitHoldsAcrossNodes(t *testing.T, store eventstore.Store) {
	ctx := context.Background()
	nodes := []*Endpoints{node(t, store, 5), node(t, store, 5)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 16 {
		wg.Go(func() {
			err := registerKey(nodes[i%2], "alice", fmt.Sprintf("k%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrLimit):
				refused++
			default:
				t.Errorf("registration %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok != 5 || refused != 11 {
		t.Errorf("%d registered, %d refused; want 5 and 11", ok, refused)
	}
	for i, n := range nodes {
		if err := n.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(n.List("alice", false)); got != 5 {
			t.Errorf("node %d lists %d endpoints", i, got)
		}
	}
	if err := registerKey(nodes[1], "bob", "k0"); err != nil {
		t.Errorf("another client's first endpoint: %v", err)
	}
	if _, err := nodes[0].SetStatus(ctx, nodes[0].List("alice", false)[0].ID, "alice", false, StatusDeleted, ""); err != nil {
		t.Fatal(err)
	}
	if err := registerKey(nodes[1], "alice", "after-delete"); err != nil {
		t.Errorf("after a delete on the other node: %v", err)
	}
	if err := registerKey(nodes[1], "alice", "one-more"); !errors.Is(err, ErrLimit) {
		t.Errorf("one more: %v", err)
	}
}

// A slot claimed by a registration that did not follow (it died, or is still on its way) is
// freed by a registration that needs it, after voiding the registration: that one, when it
// comes, is refused and claims again.
func TestOrphanSlotsAreFreed(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	es := node(t, store, 2)
	late := EndpointID("alice", "late")
	claimOnly := func(id string) {
		t.Helper()
		claim, err := es.claim(ctx, "alice", id)
		if err != nil || len(claim) != 1 {
			t.Fatal(claim, err)
		}
		if _, err := store.Append(ctx, claim[0].Stream, claim[0].Expected, claim[0].Events...); err != nil {
			t.Fatal(err)
		}
	}
	claimOnly(late)
	expected, err := es.registrationRevision(ctx, late) // what the registration read before it died
	if err != nil || !expected.IsNoStream() {
		t.Fatal(expected, err)
	}
	claimOnly(EndpointID("alice", "dead"))
	if err := registerKey(es, "alice", "a"); err != nil {
		t.Fatalf("with both slots held by no endpoint: %v", err)
	}
	if err := registerKey(es, "alice", "b"); err != nil {
		t.Fatalf("with one slot held by no endpoint: %v", err)
	}
	if err := es.record(ctx, late, expected, TypeRegistered, Registered{ID: late, Principal: "alice"}); !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Errorf("the voided registration was appended: %v", err)
	}
	if err := registerKey(es, "alice", "late"); !errors.Is(err, ErrLimit) {
		t.Errorf("the voided registration again, at the limit: %v", err)
	}
	if _, err := es.SetStatus(ctx, es.List("alice", false)[0].ID, "alice", false, StatusDeleted, ""); err != nil {
		t.Fatal(err)
	}
	if err := registerKey(es, "alice", "late"); err != nil {
		t.Errorf("the voided registration again, with a slot free: %v", err)
	}
	if n := len(es.List("alice", false)); n != 2 {
		t.Errorf("%d endpoints", n)
	}
}

// voidRacer is the store with another node that voids the same orphan registration just
// before this node's first void, which the store then refuses.
type voidRacer struct {
	*sqlite.Store
	raced bool
}

func (v *voidRacer) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if !v.raced && strings.HasPrefix(stream, endpointPrefix) && len(events) == 1 && events[0].Type == TypeVoided {
		v.raced = true
		other := events[0]
		other.ID = uuid.New()
		if _, err := v.Store.Append(ctx, stream, expected, other); err != nil {
			return eventstore.AppendResult{}, err
		}
	}
	return v.Store.Append(ctx, stream, expected, events...)
}

// A void of an orphan registration that another node's void beats is read again, and the
// registration that needed the slot goes on.
func TestOrphanVoidRacingAnotherIsReadAgain(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	claim, err := node(t, store, 1).claim(ctx, "alice", EndpointID("alice", "dead"))
	if err != nil || len(claim) != 1 {
		t.Fatal(claim, err)
	}
	if _, err := store.Append(ctx, claim[0].Stream, claim[0].Expected, claim[0].Events...); err != nil {
		t.Fatal(err)
	}
	racer := &voidRacer{Store: store}
	if err := registerKey(node(t, racer, 1), "alice", "a"); err != nil || !racer.raced {
		t.Fatalf("a registration whose void of the orphan lost to another node's (raced %v): %v", racer.raced, err)
	}
}

// A slot stream names all the endpoints every slotsFullEvery events and the changes in
// between; a read folds them into the endpoints registered and not deleted.
func TestSlotsFoldChanges(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	es := node(t, store, 100)
	for i := range 2*slotsFullEvery + 5 {
		if err := registerKey(es, "alice", fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range es.List("alice", false)[:7] {
		if _, err := es.SetStatus(ctx, ep.ID, "alice", false, StatusDeleted, ""); err != nil {
			t.Fatal(err)
		}
	}
	st, err := es.slots(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ep := range es.List("alice", false) {
		want = append(want, ep.ID)
	}
	if len(st.ids) != 2*slotsFullEvery-2 || len(missing(st.ids, want)) != 0 || len(missing(want, st.ids)) != 0 {
		t.Errorf("slots %d, want the %d endpoints", len(st.ids), len(want))
	}
	if n := eventstoretest.StreamLen(t, store, slotsStream("alice")); n != 2*slotsFullEvery+12 || st.changes >= slotsFullEvery {
		t.Errorf("%d slot events, %d changes since the last naming all", n, st.changes)
	}
}
