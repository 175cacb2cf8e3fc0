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
// principal), whose every event names all of them. A registration claims its endpoint's slot
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

// Slots is the event of a slot stream: the endpoints of the principal.
type Slots struct {
	IDs []string  `json:"ids"`
	At  time.Time `json:"at"`
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

// slots reads principal's slots and the expected revision of the next change. Before the
// principal's first claim they are its endpoints known here (registered before slots were
// counted); a claim from another node meanwhile makes the first append fail.
func (es *Endpoints) slots(ctx context.Context, principal string) ([]string, eventstore.ExpectedRevision, error) {
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}
	for e, err := range es.Store.ReadStream(ctx, slotsStream(principal), opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return nil, eventstore.Any, fmt.Errorf("read the webhook slots of %s: %w", principal, err)
		}
		var s Slots
		if err := json.Unmarshal(e.Data, &s); err != nil {
			return nil, eventstore.Any, fmt.Errorf("webhook slots of %s at %d: %w", principal, e.Revision, err)
		}
		return s.IDs, eventstore.Exact(e.Revision), nil
	}
	var ids []string
	for _, ep := range es.List(principal, false) {
		ids = append(ids, ep.ID)
	}
	return ids, eventstore.NoStream, nil
}

// slotsAppend is the append that sets principal's slots to ids at expected.
func (es *Endpoints) slotsAppend(principal string, expected eventstore.ExpectedRevision, ids []string) (eventstore.StreamAppend, error) {
	ev, err := newEvent(TypeSlots, Slots{IDs: ids, At: es.Now().UTC()})
	return eventstore.StreamAppend{Stream: slotsStream(principal), Expected: expected, Events: []eventstore.EventData{ev}}, err
}

// claim returns the append that takes a slot for endpoint id of principal, to be made before
// (or with) its registration; none if id holds one. ErrLimit if they are all taken.
func (es *Endpoints) claim(ctx context.Context, principal, id string) ([]eventstore.StreamAppend, error) {
	ids, expected, err := es.slots(ctx, principal)
	if err != nil || slices.Contains(ids, id) {
		return nil, err
	}
	if len(ids) >= es.Config.MaxEndpoints {
		if ids, err = es.freeSlots(ctx, ids); err != nil {
			return nil, err
		}
	}
	if n := len(ids); n >= es.Config.MaxEndpoints {
		return nil, fmt.Errorf("%w: %s has %d endpoints, the most a client may have", ErrLimit, principal, n)
	}
	a, err := es.slotsAppend(principal, expected, append(slices.Clip(ids), id))
	return []eventstore.StreamAppend{a}, err
}

// release frees the slot of endpoint id of principal, at the exact revision read, reading
// again while another change comes first.
func (es *Endpoints) release(ctx context.Context, principal, id string) error {
	for range 20 {
		ids, expected, err := es.slots(ctx, principal)
		if err != nil || !slices.Contains(ids, id) {
			return err
		}
		a, err := es.slotsAppend(principal, expected, slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == id }))
		if err != nil {
			return err
		}
		_, err = es.Store.Append(ctx, a.Stream, a.Expected, a.Events...)
		if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return err
		}
	}
	return fmt.Errorf("free the webhook slot of %s: %w", id, eventstore.ErrWrongExpectedRevision)
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
		expected, err := es.registrationRevision(ctx, id)
		if errors.Is(err, errRegistered) {
			if err := es.Reload(ctx, id); err != nil {
				return nil, err
			}
			if ep, ok := es.lookup(id); ok && ep.Status != StatusDeleted {
				held = append(held, id)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		// Voided at the revision its registration expects (again if it was voided before and
		// claimed since), so that the registration, still on its way, is refused.
		ev, err := newEvent(TypeVoided, Voided{At: es.Now().UTC()})
		if err != nil {
			return nil, err
		}
		if _, err := es.Store.Append(ctx, endpointPrefix+id, expected, ev); err != nil {
			return nil, fmt.Errorf("void webhook endpoint %s: %w", id, err) // registered meanwhile: read again
		}
	}
	return held, nil
}

// registrationRevision is the expected revision of endpoint id's registration: no stream, or
// the revision of the void that took its place. errRegistered if the stream holds it.
func (es *Endpoints) registrationRevision(ctx context.Context, id string) (eventstore.ExpectedRevision, error) {
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}
	for e, err := range es.Store.ReadStream(ctx, endpointPrefix+id, opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return eventstore.Any, fmt.Errorf("read webhook endpoint %s: %w", id, err)
		}
		if e.Type != TypeVoided {
			return eventstore.Any, errRegistered
		}
		return eventstore.Exact(e.Revision), nil
	}
	return eventstore.NoStream, nil
}
