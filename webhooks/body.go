package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

// body builds the payload of delivery d: the event and the order's state after it. The state
// comes from the runner's memory of the order's previous event when it has it (deliveries of
// one order go in log order), else from the order's stream folded up to the event.
func (r *runner) body(ctx context.Context, d Delivery) ([]byte, error) {
	r.mu.Lock()
	state, known := r.states[d.OrderID]
	r.mu.Unlock()
	from := uint64(0)
	if known && state.Version == int64(d.Revision) {
		from = d.Revision
	} else {
		state = order.State{}
	}
	var last eventstore.RecordedEvent
	opts := eventstore.ReadStreamOptions{From: from, Limit: d.Revision + 1 - from}
	for e, err := range r.s.Store.ReadStream(ctx, d.Stream, opts) {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", d.Stream, err)
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return nil, fmt.Errorf("%s@%d: %w", d.Stream, e.Revision, err)
		}
		state, last = order.Evolve(state, ev), e
	}
	if last.Revision != d.Revision || last.ID.String() != d.ID {
		return nil, fmt.Errorf("%s@%d is not the event %s", d.Stream, d.Revision, d.ID)
	}
	r.mu.Lock()
	if len(r.states) >= maxStates {
		clear(r.states)
	}
	r.states[d.OrderID] = state
	r.mu.Unlock()
	p := Payload{ID: d.ID, Type: d.Type, CreatedAt: last.Recorded.UTC(), OrderID: d.OrderID, Revision: d.Revision}
	// The event as the current version of its type reads, as the payload's schema shows it.
	_, data, err := order.Upcast(last.Type, last.Data)
	if err != nil {
		return nil, fmt.Errorf("%s@%d: %w", d.Stream, d.Revision, err)
	}
	p.Data.Event = json.RawMessage(data)
	p.Data.Order = viewOf(state)
	return json.Marshal(p)
}
