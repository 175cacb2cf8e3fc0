package kurrent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
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
	if err != nil && expected.IsNoStream() {
		rev, hidden, herr := s.hidden(ctx, c, stream, err)
		if herr != nil {
			return eventstore.AppendResult{}, herr
		}
		if hidden {
			res, err = c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.StreamRevision{Value: rev}}, data...)
		}
	}
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

// Truncate implements eventstore.Store by the stream's $tb, the rest of its metadata kept:
// KurrentDB hides the events before it from reads at once and removes them at a scavenge.
func (s *Store) Truncate(ctx context.Context, stream string, before uint64) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	if err := s.truncate(ctx, stream, before); err != nil {
		return fmt.Errorf("truncate %s before %d: %w", stream, before, err)
	}
	return nil
}

func (s *Store) truncate(ctx context.Context, stream string, before uint64) error {
	c, callCtx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	actual, err := s.actual(callCtx, c, stream)
	release()
	last, exists := actual.Revision()
	switch {
	case err != nil:
		return err
	case !exists:
		return fmt.Errorf("%w: %s", eventstore.ErrStreamNotFound, stream)
	case before > last:
		return fmt.Errorf("%w: past its last revision %d", eventstore.ErrInvalidArgument, last)
	}
	return s.setMetadata(ctx, stream, "$tb", strconv.FormatUint(before, 10))
}

func (s *Store) delete(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	if !expected.IsAny() {
		// KurrentDB takes the last revision of a soft-deleted stream as a match and deletes it
		// again, and a stream whose events are all past its $maxAge as one that exists; the
		// contract says that neither has a revision, nor exists. Deletes are rare, so look
		// first.
		actual, err := s.actual(ctx, c, stream)
		if err != nil {
			return err
		}
		last, live := actual.Revision() // actual is NoStream or Exact
		if !expected.Matches(live, last) {
			return &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: actual}
		}
		if !live {
			return nil // NoStream on a stream without events to read: nothing to delete
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

// hidden says whether KurrentDB refused an append with NoStream (err) only because the stream
// has events that no read returns: every one is past the $maxAge, $maxCount or $tb of its
// metadata. For the contract such a stream does not exist, so Append then appends at the
// revision KurrentDB reported as current, which hidden returns: the stream goes on from there,
// as KurrentDB would have it, and a concurrent append at that revision still makes exactly one of
// the two fail. KurrentDB keeps that revision from expiry through scavenges, so without this a
// key claimed with NoStream once its events expired would be refused for good.
//
// A refusal reports writes that stream reads do not return yet: KurrentDB checks an append
// against every write it has accepted, and a read sees a write only once it is indexed (in a
// cluster, once a quorum has it). Taking such a write for a hidden event would append a second
// first event beside it. So before it reads the stream, hidden writes the stream's metadata
// again, unchanged: KurrentDB acknowledges that write only after every write before it is
// readable, the refused-for one included. A stream without any of those metadata keys hides
// nothing and the refusal stands as it is. Reads go to the node the client prefers (the leader
// unless the connection string says otherwise); a follower could still lag.
func (s *Store) hidden(ctx context.Context, c *esdb.Client, stream string, err error) (uint64, bool, error) {
	if strings.HasPrefix(stream, "$") || !errors.Is(s.translate(ctx, c, err), errWrongVersion) {
		return 0, false, nil
	}
	rev, ok := currentRevision(err.Error())
	if !ok {
		return 0, false, nil // the client words it otherwise: refuse as before
	}
	for {
		meta, expected, err := s.readMetadata(ctx, stream)
		if err != nil {
			return 0, false, err
		}
		if meta["$maxAge"] == nil && meta["$maxCount"] == nil && meta["$tb"] == nil {
			return 0, false, nil
		}
		err = s.writeMetadata(ctx, stream, expected, meta)
		if errors.Is(err, errWrongVersion) {
			continue // changed meanwhile: that was not our write, so not the barrier we need
		}
		if err != nil {
			return 0, false, err
		}
		break
	}
	actual, err := s.actual(ctx, c, stream)
	if err != nil {
		return 0, false, err
	}
	return rev, actual == eventstore.NoStream, nil
}

// gotRevision finds the current revision in the text of the client's wrong-expected-version
// error, "wrong expected version: expecting '%s' but got '%s'" (esdb/client.go), the only place
// where the client gives it; "no_stream" when the stream has none.
var gotRevision = regexp.MustCompile(`wrong expected version: expecting '[^']*' but got '([0-9]+)'`)

// currentRevision is the current revision that a wrong-expected-version error's text reports,
// and false when it reports none or words it otherwise.
func currentRevision(msg string) (uint64, bool) {
	m := gotRevision.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	rev, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return rev, true
}

// SetMaxAge implements eventstore.MaxAgeSetter: it sets the stream's $maxAge, keeping the rest
// of its metadata ($tb from a delete, say). KurrentDB stops returning its events older than d
// from stream reads (this backend then reads the stream as not found once none is left, and an
// append with NoStream goes on from its last revision, see hidden) and a scavenge removes them
// from disk. The age counts from each event's creation, in whole seconds: d is rounded up.
func (s *Store) SetMaxAge(ctx context.Context, stream string, d time.Duration) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	seconds := int64((d + time.Second - 1) / time.Second)
	if seconds < 1 {
		return fmt.Errorf("%w: max age %v is under a second", eventstore.ErrInvalidArgument, d)
	}
	if err := s.setMetadata(ctx, stream, "$maxAge", strconv.FormatInt(seconds, 10)); err != nil {
		return fmt.Errorf("set max age of %s: %w", stream, err)
	}
	return nil
}

// setMetadata sets one key of the stream's metadata, keeping the others, written at the
// metadata stream's exact revision so that a concurrent change is not lost. Most streams whose
// metadata is set (new key streams) have none yet: it writes with NoStream first and reads
// only when that fails, and writes nothing when the key already has the value.
func (s *Store) setMetadata(ctx context.Context, stream, key, value string) error {
	meta, expected := map[string]json.RawMessage{}, eventstore.NoStream
	for {
		meta[key] = json.RawMessage(value)
		err := s.writeMetadata(ctx, stream, expected, meta)
		if !errors.Is(err, errWrongVersion) {
			return err
		}
		if meta, expected, err = s.readMetadata(ctx, stream); err != nil {
			return err
		}
		if string(meta[key]) == value {
			return nil
		}
	}
}

// readMetadata returns the stream's metadata ("$$" + stream) as an object and the revision to
// write the next at; metadata that is not a JSON object reads as empty, to be replaced.
func (s *Store) readMetadata(ctx context.Context, stream string) (map[string]json.RawMessage, eventstore.ExpectedRevision, error) {
	meta := map[string]json.RawMessage{}
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return nil, eventstore.ExpectedRevision{}, err
	}
	defer release()
	rs, err := c.ReadStream(ctx, "$$"+stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err := s.translate(ctx, c, err); err != nil {
		return nil, eventstore.ExpectedRevision{}, err
	}
	defer rs.Close()
	ev, err := rs.Recv()
	if errors.Is(err, io.EOF) {
		return meta, eventstore.NoStream, nil
	}
	if err := s.translate(ctx, c, err); err != nil {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return meta, eventstore.NoStream, nil
		}
		return nil, eventstore.ExpectedRevision{}, err
	}
	e := ev.OriginalEvent()
	json.Unmarshal(e.Data, &meta)
	return meta, eventstore.Exact(e.EventNumber), nil
}

// writeMetadata writes the stream's metadata at the metadata stream's expected revision. A
// wrong expected revision comes back as errWrongVersion, for the caller to read again.
func (s *Store) writeMetadata(ctx context.Context, stream string, expected eventstore.ExpectedRevision, meta map[string]json.RawMessage) error {
	data, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = c.AppendToStream(ctx, "$$"+stream, esdb.AppendToStreamOptions{ExpectedRevision: toExpected(expected)},
		esdb.EventData{EventID: uuid.New(), EventType: "$metadata", ContentType: esdb.ContentTypeJson, Data: data})
	return s.translate(ctx, c, err)
}
