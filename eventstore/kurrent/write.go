package kurrent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	res, err := s.append(ctx, stream, expected, events)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	return res, nil
}

func (s *Store) append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (eventstore.AppendResult, error) {
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer release()
	data := make([]esdb.EventData, len(events))
	for i, e := range events {
		data[i] = esdb.EventData{
			EventID:     e.ID,
			EventType:   e.Type,
			ContentType: esdb.ContentTypeJson,
			Data:        e.Data,
			Metadata:    e.Metadata,
		}
	}
	res, err := c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: toExpected(expected)}, data...)
	if err := s.translate(ctx, c, err); err != nil {
		return eventstore.AppendResult{}, s.wrongRevision(ctx, c, err, stream, expected)
	}
	return eventstore.AppendResult{
		Revision: res.NextExpectedVersion,
		Position: eventstore.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition},
	}, nil
}

// DeleteStream implements eventstore.Store with a soft delete: KurrentDB sets the stream's $tb
// (truncate before) so that reads answer not found, keeps its events in $all until a scavenge,
// and lets the stream be written again, its revisions going on.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	if err := s.delete(ctx, stream, expected); err != nil {
		return fmt.Errorf("delete %s@%v: %w", stream, expected, err)
	}
	return nil
}

func (s *Store) delete(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	if rev, exact := expected.Revision(); exact {
		// KurrentDB takes the last revision of a soft-deleted stream as a match and deletes it
		// again; the contract says a deleted stream has no revision. Deletes are rare (expired
		// keys), so look first.
		actual, err := s.actual(ctx, c, stream)
		if err != nil {
			return err
		}
		if actual != eventstore.Exact(rev) {
			return &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: actual}
		}
	}
	_, err = c.DeleteStream(ctx, stream, esdb.DeleteStreamOptions{ExpectedRevision: toExpected(expected)})
	if err := s.translate(ctx, c, err); err != nil {
		return s.wrongRevision(ctx, c, err, stream, expected)
	}
	return nil
}

// wrongRevision completes errWrongVersion into the contract's error; other errors pass. The
// client gives KurrentDB's current revision only as text, and KurrentDB's is not the contract's
// for a soft-deleted stream (its last revision, where the contract says NoStream), so Actual is
// read after the failure: the stream's state then, which may be later than the one that failed
// the append.
func (s *Store) wrongRevision(ctx context.Context, c *esdb.Client, err error, stream string, expected eventstore.ExpectedRevision) error {
	if !errors.Is(err, errWrongVersion) {
		return err
	}
	actual, rerr := s.actual(ctx, c, stream)
	if rerr != nil {
		return fmt.Errorf("%w (reading the actual revision: %v)",
			&eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: eventstore.NoStream}, rerr)
	}
	return &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: actual}
}

// actual is the stream's state as the contract sees it: NoStream when it has no event to read
// (never written, deleted, or every event past $maxAge), else the revision of its last event.
func (s *Store) actual(ctx context.Context, c *esdb.Client, stream string) (eventstore.ExpectedRevision, error) {
	rs, err := c.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err := s.translate(ctx, c, err); err != nil {
		return eventstore.ExpectedRevision{}, err
	}
	defer rs.Close()
	ev, err := rs.Recv()
	if errors.Is(err, io.EOF) {
		return eventstore.NoStream, nil
	}
	if err := s.translate(ctx, c, err); err != nil {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return eventstore.NoStream, nil
		}
		return eventstore.ExpectedRevision{}, err
	}
	return eventstore.Exact(ev.OriginalEvent().EventNumber), nil
}

func toExpected(e eventstore.ExpectedRevision) esdb.ExpectedRevision {
	switch {
	case e.IsNoStream():
		return esdb.NoStream{}
	case e.IsStreamExists():
		return esdb.StreamExists{}
	}
	if rev, ok := e.Revision(); ok {
		return esdb.StreamRevision{Value: rev}
	}
	return esdb.Any{}
}

// SetMaxAge sets the stream's $maxAge: KurrentDB stops returning its events older than d from
// stream reads (this backend then reads the stream as not found once none is left) and a
// scavenge removes them from disk. The stream keeps its revision: an append with NoStream to
// a stream whose events all expired is refused, so whoever relies on expiry must append at the
// exact revision (see the package doc). The other metadata ($tb from a delete, say) is kept.
func (s *Store) SetMaxAge(ctx context.Context, stream string, d time.Duration) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	seconds := int64((d + time.Second - 1) / time.Second)
	if seconds < 1 {
		return fmt.Errorf("%w: max age %v is under a second", eventstore.ErrInvalidArgument, d)
	}
	for {
		err := s.setMetadata(ctx, stream, "$maxAge", strconv.FormatInt(seconds, 10))
		if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			if err != nil {
				return fmt.Errorf("set max age of %s: %w", stream, err)
			}
			return nil
		}
		// Someone else changed the metadata meanwhile: merge into theirs.
	}
}

// setMetadata sets one key of the stream's metadata, read and written at the metadata stream's
// exact revision so that a concurrent change is not lost.
func (s *Store) setMetadata(ctx context.Context, stream, key, value string) error {
	meta := "$$" + stream
	c, cctx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	raw := map[string]json.RawMessage{}
	expected := eventstore.NoStream
	rs, err := c.ReadStream(cctx, meta, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err = s.translate(cctx, c, err); err == nil {
		var ev *esdb.ResolvedEvent
		ev, err = rs.Recv()
		rs.Close()
		if err == nil {
			e := ev.OriginalEvent()
			expected = eventstore.Exact(e.EventNumber)
			json.Unmarshal(e.Data, &raw) // metadata that is not an object is replaced
		} else if errors.Is(err, io.EOF) {
			err = nil
		} else {
			err = s.translate(cctx, c, err)
		}
	}
	release()
	if err != nil && !errors.Is(err, eventstore.ErrStreamNotFound) {
		return err
	}
	raw[key] = json.RawMessage(value)
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	_, err = s.Append(ctx, meta, expected, eventstore.EventData{ID: uuid.New(), Type: "$metadata", Data: data})
	return err
}
