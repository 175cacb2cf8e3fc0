package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acme/orders/eventstore"
)

// A principal's endpoints are counted in its slot stream (slotsPrefix + a hash of the
// principal), whose events name all of them or the ones added and removed. A registration claims its endpoint's slot
// there, appending at the exact revision it read, before its registration or with it in one
// atomic append where the store can: of two nodes registering at once for one principal, one
// append is refused and that node reads again, so the principal never holds more than
// Config.MaxEndpoints slots, on any number of nodes. A delete frees its slot.
//
// A registration that died between its claim and its registration holds a slot without an
// endpoint; so does a delete that died before freeing its slot. When a principal's slots are all
// taken, a registration frees those: a deleted endpoint's at once, and a slot without a
// registration after voiding it (a TypeVoided event appended to the endpoint's stream at the
// revision the registration expects, so that the registration, if it is still on its way, is
// refused and claims again).

// Slots is an event of a slot stream: every slotsFullEvery events, all of the principal's
// endpoints (All); in between, the ones added and removed. The events are small, since every
// runner that reads the log reads them; a read takes the last All and the changes after it.
type Slots struct {
	All     bool      `json:"all,omitempty"`
	IDs     []string  `json:"ids,omitempty"` // with All
	Added   []string  `json:"added,omitempty"`
	Removed []string  `json:"removed,omitempty"`
	At      time.Time `json:"at"`
}

// slotsFullEvery bounds the events a read of a slot stream takes.
const slotsFullEvery = 32

// slotState is a slot stream read: the endpoints holding a slot, the expected revision of the
// next change, and the changes since the last event naming them all.
type slotState struct {
	ids      []string
	expected eventstore.ExpectedRevision
	changes  int
}

// Voided takes the place of a registration that claimed a slot and did not follow.
type Voided struct {
	At time.Time `json:"at"`
}

// errRegistered: the endpoint's stream holds its registration.
var errRegistered = errors.New("webhook endpoint registered")

func slotsStream(principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return slotsPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// slots reads principal's slots. Before the principal's first claim they are its endpoints
// known here (registered before slots were counted); a claim from another node meanwhile makes
// the first append fail.
func (es *Endpoints) slots(ctx context.Context, principal string) (slotState, error) {
	var events []Slots
	st := slotState{expected: eventstore.NoStream}
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: slotsFullEvery}
	for e, err := range es.Store.ReadStream(ctx, slotsStream(principal), opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return slotState{}, fmt.Errorf("read the webhook slots of %s: %w", principal, err)
		}
		var ev Slots
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return slotState{}, fmt.Errorf("webhook slots of %s at %d: %w", principal, e.Revision, err)
		}
		if len(events) == 0 {
			st.expected = eventstore.Exact(e.Revision)
		}
		if events = append(events, ev); ev.All {
			break
		}
	}
	if len(events) == 0 {
		for _, ep := range es.List(principal, false) {
			st.ids = append(st.ids, ep.ID)
		}
		return st, nil
	}
	if !events[len(events)-1].All {
		return slotState{}, fmt.Errorf("webhook slots of %s: no event naming them all in the last %d", principal, slotsFullEvery)
	}
	st.changes = len(events) - 1
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		st.ids = append(slices.DeleteFunc(append(st.ids, ev.IDs...), func(id string) bool { return slices.Contains(ev.Removed, id) }), ev.Added...)
	}
	return st, nil
}

// slotsAppend is the append that changes principal's slots from st to ids.
func (es *Endpoints) slotsAppend(principal string, st slotState, ids []string) (eventstore.StreamAppend, error) {
	ev := Slots{At: es.Now().UTC()}
	if st.expected.IsNoStream() || st.changes+1 >= slotsFullEvery {
		ev.All, ev.IDs = true, ids
	} else {
		ev.Added, ev.Removed = missing(ids, st.ids), missing(st.ids, ids)
	}
	e, err := newEvent(TypeSlots, ev)
	return eventstore.StreamAppend{Stream: slotsStream(principal), Expected: st.expected, Events: []eventstore.EventData{e}}, err
}

// claim returns the append that takes a slot for endpoint id of principal, to be made before
// (or with) its registration; none if id holds one. ErrLimit if they are all taken.
func (es *Endpoints) claim(ctx context.Context, principal, id string) ([]eventstore.StreamAppend, error) {
	st, err := es.slots(ctx, principal)
	if err != nil || slices.Contains(st.ids, id) {
		return nil, err
	}
	ids := st.ids
	if len(ids) >= es.Config.MaxEndpoints {
		if ids, err = es.freeSlots(ctx, ids); err != nil {
			return nil, err
		}
	}
	if n := len(ids); n >= es.Config.MaxEndpoints {
		return nil, fmt.Errorf("%w: %s has %d endpoints, the most a client may have", ErrLimit, principal, n)
	}
	a, err := es.slotsAppend(principal, st, append(slices.Clone(ids), id))
	return []eventstore.StreamAppend{a}, err
}

// release frees the slot of endpoint id of principal, at the exact revision read, reading
// again while another change comes first.
func (es *Endpoints) release(ctx context.Context, principal, id string) error {
	for range 20 {
		st, err := es.slots(ctx, principal)
		if err != nil || !slices.Contains(st.ids, id) {
			return err
		}
		a, err := es.slotsAppend(principal, st, slices.DeleteFunc(slices.Clone(st.ids), func(s string) bool { return s == id }))
		if err != nil {
			return err
		}
		_, err = es.Store.Append(ctx, a.Stream, a.Expected, a.Events...)
		if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return err
		}
	}
	return fmt.Errorf("free the webhook slot of %s: %w", id, ErrContended)
}

// freeSlots returns ids without the slots that hold no endpoint: a deleted one's, and those
// of registrations that did not follow their claim, which it voids.
func (es *Endpoints) freeSlots(ctx context.Context, ids []string) ([]string, error) {
	var held []string
	for _, id := range ids {
		if ep, ok := es.lookup(id); ok && ep.Status != StatusDeleted {
			held = append(held, id)
			continue
		}
		holds, err := es.holdsSlot(ctx, id)
		if err != nil {
			return nil, err
		}
		if holds {
			held = append(held, id)
		}
	}
	return held, nil
}

// holdsSlot reports whether endpoint id, which this node does not hold registered, is
// registered in the store; if it is not, it voids it at the revision its registration
// expects (again if it was voided before and claimed since), so that the registration, still
// on its way, is refused. A void refused because the registration or another node's void came
// first reads the endpoint again.
func (es *Endpoints) holdsSlot(ctx context.Context, id string) (bool, error) {
	for range maxPlanTries {
		expected, err := es.registrationRevision(ctx, id)
		if errors.Is(err, errRegistered) {
			if err := es.Reload(ctx, id); err != nil {
				return false, err
			}
			ep, ok := es.lookup(id)
			return ok && ep.Status != StatusDeleted, nil
		}
		if err != nil {
			return false, err
		}
		ev, err := newEvent(TypeVoided, Voided{At: es.Now().UTC()})
		if err != nil {
			return false, err
		}
		switch _, err := es.Store.Append(ctx, endpointPrefix+id, expected, ev); {
		case err == nil:
			return false, nil
		case !errors.Is(err, eventstore.ErrWrongExpectedRevision):
			return false, fmt.Errorf("void webhook endpoint %s: %w", id, err)
		}
	}
	return false, fmt.Errorf("void webhook endpoint %s: %w", id, ErrContended)
}

// registrationRevision is the expected revision of endpoint id's registration: no stream, or
// the revision of the void that took its place. errRegistered if the stream holds it.
func (es *Endpoints) registrationRevision(ctx context.Context, id string) (eventstore.ExpectedRevision, error) {
	e, found, err := eventstore.Last(ctx, es.Store, endpointPrefix+id)
	switch {
	case err != nil:
		return eventstore.Any, fmt.Errorf("webhook endpoint %s: %w", id, err)
	case !found:
		return eventstore.NoStream, nil
	case e.Type != TypeVoided:
		return eventstore.Any, errRegistered
	}
	return eventstore.Exact(e.Revision), nil
}

// missing returns the ids of a that b does not hold.
func missing(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, id := range b {
		in[id] = true
	}
	var out []string
	for _, id := range a {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}
