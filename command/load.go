package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// Order is an order folded from its stream.
type Order struct {
	State    order.State         // zero (StatusNone) when the stream does not exist
	Position eventstore.Position // of the last event; zero when the stream does not exist
	Hash     string              // chain hash of the last event; "" if it has none
	// Owner is the principal that created the order (from its first event's metadata).
	Owner string
	// Key is where the events of the idempotency key asked for are, if the stream has any.
	Key *KeyEvents
}

// KeyEvents locates the events that one idempotency key appended to an order.
type KeyEvents struct {
	Fingerprint string
	Command     string
	Events      []order.Event
	State       order.State // the order right after the key's last event
	Revision    uint64
	Position    eventstore.Position
}

// Revision is the revision of the order's last event; meaningful when the order exists.
func (o Order) Revision() uint64 { return uint64(o.State.Version - 1) }

func (o Order) expected() eventstore.ExpectedRevision {
	if o.State.Version == 0 {
		return eventstore.NoStream
	}
	return eventstore.Exact(o.Revision())
}

// Load folds the order id from its stream, noting where the events of the principal's key are
// (key may be empty). A missing order is the zero Order, not an error.
func (h *Handler) Load(ctx context.Context, id, principal, key string) (Order, error) {
	return h.load(ctx, id, principal, key, nil)
}

// load is Load that also adds the key (keyOf) of every keyed event to keys, if not nil.
func (h *Handler) load(ctx context.Context, id, principal, key string, keys map[string]struct{}) (Order, error) {
	var o Order
	var f order.Folder
	var lastMeta []byte
	needle := newKeyNeedle(principal, key)
	for e, err := range h.Store.ReadStream(ctx, StreamName(id), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return Order{}, nil
		}
		if err != nil {
			return Order{}, fmt.Errorf("load order %s: %w", id, err)
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return Order{}, fmt.Errorf("load order %s: %s@%d: %w", id, e.Stream, e.Revision, err)
		}
		f.Apply(ev)
		o.Position, lastMeta = e.Position, e.Metadata
		first := e.Revision == 0
		if !first && keys == nil && (key == "" || !needle.mayName(e.Metadata)) {
			continue
		}
		var md Metadata
		if err := json.Unmarshal(e.Metadata, &md); err != nil {
			return Order{}, fmt.Errorf("load order %s: event %d metadata: %w", id, e.Revision, err)
		}
		if first {
			o.Owner = md.Principal
		}
		if keys != nil && md.IdempotencyKey != "" {
			keys[keyOf(md.Principal, md.IdempotencyKey)] = struct{}{}
		}
		if key == "" || md.IdempotencyKey != key || md.Principal != principal {
			continue
		}
		if o.Key == nil {
			o.Key = &KeyEvents{Fingerprint: md.Fingerprint, Command: md.Command}
		}
		o.Key.Events = append(o.Key.Events, ev)
		o.Key.State, o.Key.Revision, o.Key.Position = f.State(), e.Revision, e.Position
	}
	o.State, o.Hash = f.State(), StoredHash(lastMeta)
	return o, nil
}

// keyNeedle tells, without decoding it, whether an event's metadata may name a principal's key.
// Metadata written now (chained) holds the principal's and key's members right after the hash,
// where they are compared; metadata of another layout is searched for the key's JSON text.
type keyNeedle struct{ members, key []byte }

func newKeyNeedle(principal, key string) keyNeedle {
	p, _ := json.Marshal(principal)
	k, _ := json.Marshal(key)
	return keyNeedle{fmt.Appendf(nil, `"principal":%s,"idempotencyKey":%s`, p, k), k}
}

func (n keyNeedle) mayName(metadata []byte) bool {
	if StoredHash(metadata) != "" && bytes.HasPrefix(metadata[hashMember:], []byte(`"principal":`)) {
		return bytes.HasPrefix(metadata[hashMember:], n.members)
	}
	return bytes.Contains(metadata, n.key)
}

// Point is how far LoadAt folds an order's history: up to and including a revision, or the
// events recorded at or before a time.
type Point struct {
	Revision *uint64
	At       time.Time
}

func (p Point) passed(e eventstore.RecordedEvent) bool {
	if p.Revision != nil {
		return e.Revision > *p.Revision
	}
	return e.Recorded.After(p.At)
}

// LoadAt folds the order id's events up to p, for audits: the state the order was in then,
// and the revision of the last event folded. ok is false if the order did not exist then.
func (h *Handler) LoadAt(ctx context.Context, id string, p Point) (s order.State, revision uint64, ok bool, err error) {
	var f order.Folder
	for e, err := range h.Store.ReadStream(ctx, StreamName(id), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return order.State{}, 0, false, nil
		}
		if err != nil {
			return order.State{}, 0, false, fmt.Errorf("load order %s: %w", id, err)
		}
		if p.passed(e) {
			break
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return order.State{}, 0, false, fmt.Errorf("load order %s: %s@%d: %w", id, e.Stream, e.Revision, err)
		}
		f.Apply(ev)
		revision, ok = e.Revision, true
	}
	return f.State(), revision, ok, nil
}

// Owner returns the principal that created order id: the one in the metadata of its first
// event. An order's owner never changes.
func (h *Handler) Owner(ctx context.Context, id string) (owner string, found bool, err error) {
	for e, err := range h.Events(ctx, id, eventstore.ReadStreamOptions{Limit: 1}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		var md Metadata
		if err := json.Unmarshal(e.Metadata, &md); err != nil {
			return "", false, fmt.Errorf("owner of order %s: %w", id, err)
		}
		return md.Principal, true, nil
	}
	return "", false, nil
}

// Events reads order id's events, as stored: its history page by page, its timeline, its
// export. A missing order is eventstore.ErrStreamNotFound.
func (h *Handler) Events(ctx context.Context, id string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return h.Store.ReadStream(ctx, StreamName(id), opts)
}
