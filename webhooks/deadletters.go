package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// deadLetterSpace is the UUIDv5 namespace of dead-letter event ids: a dead letter appended
// again after a crash has the same id, so the store takes it for a repeat.
var deadLetterSpace = uuid.MustParse("0b6f3c0e-9a43-4c59-8f6a-2f1e4c7d9b10")

func (s *Service) deadLetter(ctx context.Context, endpoint string, d Delivery) error {
	id := uuid.NewSHA1(deadLetterSpace, fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d", endpoint, d.ID, d.Tries, len(d.Attempts)))
	if d.Manual {
		id = uuid.Must(uuid.NewV7())
	}
	ev, err := eventWithID(id, TypeDeadLettered, DeadLettered{Delivery: d, At: s.now().UTC()})
	if err != nil {
		return err
	}
	_, err = s.Store.Append(ctx, deadPrefix+endpoint, eventstore.Any, ev)
	if errors.Is(err, eventstore.ErrDuplicateEventID) {
		err = nil
	}
	if err == nil {
		s.deadInc()
		s.logEndpoint(endpoint, "dead-lettered", slog.String("delivery", d.ID), slog.Int("tries", d.Tries))
	}
	return err
}

// DeadLetters returns the endpoint's dead letters not re-sent since, the latest last, at most
// limit of them.
func (s *Service) DeadLetters(ctx context.Context, id string, limit int) ([]DeadLettered, error) {
	f, err := s.foldDead(ctx, id)
	dead := f.dead
	if len(dead) > limit {
		dead = dead[len(dead)-limit:]
	}
	return dead, err
}

// deadFold is an endpoint's dead-letter stream folded: the dead letters not re-sent since (the
// latest last) with the revision of each, the deliveries whose retry was asked for since their
// last dead letter, and the stream's last revision.
type deadFold struct {
	dead     []DeadLettered
	at       map[string]uint64 // by delivery id
	retrying map[string]bool
	last     uint64
	found    bool
}

func (s *Service) foldDead(ctx context.Context, id string) (deadFold, error) {
	f := deadFold{at: map[string]uint64{}, retrying: map[string]bool{}}
	for e, err := range s.Store.ReadStream(ctx, deadPrefix+id, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return f, nil
		}
		if err != nil {
			return deadFold{}, fmt.Errorf("read dead letters of %s: %w", id, err)
		}
		var d struct {
			DeadLettered
			DeliveryID string `json:"deliveryId"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return deadFold{}, fmt.Errorf("dead letters of %s at %d: %w", id, e.Revision, err)
		}
		f.last, f.found = e.Revision, true
		switch e.Type {
		case TypeDeadLettered:
			f.dead = append(removeDelivery(f.dead, d.ID), d.DeadLettered)
			f.at[d.ID] = e.Revision
			delete(f.retrying, d.ID)
		case TypeRetryRequested:
			f.dead = removeDelivery(f.dead, d.DeliveryID)
			f.retrying[d.DeliveryID] = true
		}
	}
	return f, nil
}

func removeDelivery(dead []DeadLettered, id string) []DeadLettered {
	out := dead[:0]
	for _, d := range dead {
		if d.ID != id {
			out = append(out, d)
		}
	}
	return out
}

// Retry asks for dead letter delivery of endpoint id to be sent again, once; the node that
// delivers for the endpoint takes it within a second or so. Asking again before that attempt
// ends does nothing more. ErrNotFound if there is no such dead letter.
//
// The request is appended at the revision the dead letters were read at (read again if the
// stream changed meanwhile), so two requests at once make one retry, and a compaction that
// deletes the stream at the revision it read loses no request.
func (s *Service) Retry(ctx context.Context, id, delivery, by string) error {
	for range 5 {
		f, err := s.foldDead(ctx, id)
		if err != nil || f.retrying[delivery] {
			return err
		}
		i := slices.IndexFunc(f.dead, func(d DeadLettered) bool { return d.ID == delivery })
		if i < 0 {
			return fmt.Errorf("%w: no dead letter %s", ErrNotFound, delivery)
		}
		ev, err := newEvent(TypeRetryRequested, struct {
			RetryRequested
			Delivery Delivery `json:"delivery"`
		}{RetryRequested{DeliveryID: delivery, By: by, At: s.now().UTC()}, f.dead[i].Delivery})
		if err != nil {
			return err
		}
		_, err = s.Store.Append(ctx, deadPrefix+id, eventstore.Exact(f.last), ev)
		if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ask for a retry of %s: %w", delivery, err)
		}
		s.logEndpoint(id, "retry requested", slog.String("delivery", delivery), slog.String("by", by))
		return nil
	}
	return fmt.Errorf("ask for a retry of %s: %w", delivery, ErrContended)
}

// boundDeadLetters truncates the endpoint's dead-letter stream to its latest events, three
// quarters of Config.MaxDeadLetters, once it holds more than Config.MaxDeadLetters: the older
// dead letters are dropped. The retries asked for in it are taken and checkpointed first (which
// checks the lease too), and the truncation keeps every event from the first not taken, so no
// retry asked for is dropped.
func (r *runner) boundDeadLetters(ctx context.Context, now time.Time) error {
	stream := deadPrefix + r.id
	first, last, found, err := r.s.span(ctx, stream)
	if err != nil || !found || last-first < uint64(r.s.Config.MaxDeadLetters) {
		return err
	}
	r.deadPoll = time.Time{}
	if err := r.pollRetries(ctx, now); err != nil {
		return err
	}
	if err := r.save(ctx); err != nil { // the retries taken, and the lease checked
		return err
	}
	before := min(last+1-uint64(max(1, r.s.Config.MaxDeadLetters*3/4)), r.cp.DeadRead)
	if before <= first {
		return nil
	}
	f, err := r.s.foldDead(ctx, r.id)
	if err != nil {
		return err
	}
	if err := r.s.Store.Truncate(ctx, stream, before); err != nil {
		return fmt.Errorf("drop the oldest dead letters of %s: %w", r.id, err)
	}
	dropped := 0 // the dead letters not re-sent whose last dead-lettering is gone
	for _, d := range f.dead {
		if f.at[d.ID] < before {
			dropped++
		}
	}
	r.s.droppedAdd(dropped)
	r.s.logEndpoint(r.id, "dead letters dropped", slog.Int("dropped", dropped), slog.Uint64("from", before))
	return nil
}

// span returns the first and last revisions of stream.
func (s *Service) span(ctx context.Context, stream string) (first, last uint64, found bool, err error) {
	head, found, err := eventstore.First(ctx, s.Store, stream)
	if err != nil || !found {
		return 0, 0, false, err
	}
	tail, found, err := eventstore.Last(ctx, s.Store, stream)
	if err != nil || !found {
		return 0, 0, false, err
	}
	return head.Revision, tail.Revision, true, nil
}
