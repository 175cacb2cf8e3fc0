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

// deadCopySpace is the UUIDv5 namespace of the ids of dead letters appended again by a
// compaction, derived from their copy's id in the backup: a compaction resumed after a crash
// finds which copies are in the stream already.
var deadCopySpace = uuid.MustParse("5d1f0a8e-3c2b-4e7a-9f61-8b0c2d4e6a13")

// maxBatchBytes bounds the data of one append of a compaction, below KurrentDB's default
// --max-append-size (1 MiB).
const maxBatchBytes = 256 << 10

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
// latest last), the deliveries whose retry was asked for since their last dead letter, and the
// stream's last revision.
type deadFold struct {
	dead     []DeadLettered
	retrying map[string]bool
	last     uint64
	found    bool
}

func (s *Service) foldDead(ctx context.Context, id string) (deadFold, error) {
	f := deadFold{retrying: map[string]bool{}}
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

// boundDeadLetters compacts the endpoint's dead-letter stream once it holds more than
// Config.MaxDeadLetters events. The retries asked for in it are taken and checkpointed first
// (which checks the lease too), and the stream is deleted at the revision they were read up to,
// so no retry asked for is dropped.
func (r *runner) boundDeadLetters(ctx context.Context, now time.Time) error {
	first, last, found, err := r.s.span(ctx, deadPrefix+r.id)
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
	if r.cp.DeadRead == 0 {
		return nil
	}
	return r.s.compactDead(ctx, r.id, r.cp.DeadRead-1)
}

// span returns the first and last revisions of stream.
func (s *Service) span(ctx context.Context, stream string) (first, last uint64, found bool, err error) {
	var revs [2]uint64
	for i, opts := range []eventstore.ReadStreamOptions{{Limit: 1}, {Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}} {
		for e, err := range s.Store.ReadStream(ctx, stream, opts) {
			if errors.Is(err, eventstore.ErrStreamNotFound) {
				return 0, 0, false, nil
			}
			if err != nil {
				return 0, 0, false, fmt.Errorf("read %s: %w", stream, err)
			}
			revs[i] = e.Revision
		}
	}
	return revs[0], revs[1], true, nil
}

// DeadCompacted ends the backup of a dead-letter stream being compacted: the backup holds the
// dead letters kept, to take the place of the stream's revisions up to Through.
type DeadCompacted struct {
	Through uint64    `json:"through"`
	Kept    int       `json:"kept"`
	Dropped int       `json:"dropped"`
	At      time.Time `json:"at"`
}

// compactDead replaces the endpoint's dead-letter stream, read up to revision through, by its
// latest dead letters, three quarters of Config.MaxDeadLetters at most: the others are dropped,
// and so are the retries asked for (the runner has taken them). The dead letters kept are first
// copied to a backup stream, ended by a DeadCompacted event; then the stream is deleted at
// revision through (a stream appended to since is left as it is), the copies are appended again
// and the backup deleted. A runner that finds a backup resumes there (resumeDeadCompaction).
func (s *Service) compactDead(ctx context.Context, id string, through uint64) error {
	if err := s.resumeDeadCompaction(ctx, id); err != nil {
		return err
	}
	f, err := s.foldDead(ctx, id)
	if err != nil || !f.found || f.last != through {
		return err // appended to since: the next dead letter compacts
	}
	kept := f.dead[max(0, len(f.dead)-max(1, s.Config.MaxDeadLetters*3/4)):]
	events := make([]eventstore.EventData, 0, len(kept)+1)
	for _, d := range kept {
		ev, err := newEvent(TypeDeadLettered, d)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	end, err := newEvent(TypeDeadCompacted, DeadCompacted{Through: through, Kept: len(kept), Dropped: len(f.dead) - len(kept), At: s.now().UTC()})
	if err != nil {
		return err
	}
	if err := s.appendBatches(ctx, deadBackupPrefix+id, append(events, end)); err != nil {
		return fmt.Errorf("back up the dead letters of %s: %w", id, err)
	}
	return s.resumeDeadCompaction(ctx, id)
}

// resumeDeadCompaction finishes the compaction whose backup is complete, and deletes the backup.
func (s *Service) resumeDeadCompaction(ctx context.Context, id string) error {
	backup := deadBackupPrefix + id
	var copies []eventstore.EventData
	var end *DeadCompacted
	for e, err := range s.Store.ReadStream(ctx, backup, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the dead-letter backup of %s: %w", id, err)
		}
		if e.Type == TypeDeadCompacted {
			end = &DeadCompacted{}
			if err := json.Unmarshal(e.Data, end); err != nil {
				return fmt.Errorf("dead-letter backup of %s at %d: %w", id, e.Revision, err)
			}
			break
		}
		copies = append(copies, eventstore.EventData{ID: uuid.NewSHA1(deadCopySpace, e.ID[:]), Type: e.Type, Data: e.Data})
	}
	if end != nil { // else the backup died unfinished, before the stream was touched
		if err := s.replaceDead(ctx, id, *end, copies); err != nil {
			return err
		}
	}
	return s.Store.DeleteStream(ctx, backup, eventstore.Any)
}

// replaceDead deletes the dead-letter stream at end.Through, unless that is done already, and
// appends the copies it does not hold yet.
func (s *Service) replaceDead(ctx context.Context, id string, end DeadCompacted, copies []eventstore.EventData) error {
	stream := deadPrefix + id
	first, _, found, err := s.span(ctx, stream)
	if err != nil {
		return err
	}
	if found && first <= end.Through {
		err := s.Store.DeleteStream(ctx, stream, eventstore.Exact(end.Through))
		if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return nil // appended to since the backup: this compaction is given up
		}
		if err != nil {
			return fmt.Errorf("compact the dead letters of %s: %w", id, err)
		}
		s.droppedAdd(end.Dropped)
		s.logEndpoint(id, "dead letters dropped", slog.Int("dropped", end.Dropped), slog.Int("kept", end.Kept))
	}
	stored := map[uuid.UUID]bool{}
	for e, err := range s.Store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("read dead letters of %s: %w", id, err)
		}
		stored[e.ID] = true
	}
	copies = slices.DeleteFunc(copies, func(e eventstore.EventData) bool { return stored[e.ID] })
	if err := s.appendBatches(ctx, stream, copies); err != nil {
		return fmt.Errorf("compact the dead letters of %s: %w", id, err)
	}
	return nil
}

// appendBatches appends events to stream in order, at most maxBatchBytes of data at a time.
func (s *Service) appendBatches(ctx context.Context, stream string, events []eventstore.EventData) error {
	for len(events) > 0 {
		n, size := 1, len(events[0].Data)
		for n < len(events) && size+len(events[n].Data) <= maxBatchBytes {
			size += len(events[n].Data)
			n++
		}
		if _, err := s.Store.Append(ctx, stream, eventstore.Any, events[:n]...); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}
