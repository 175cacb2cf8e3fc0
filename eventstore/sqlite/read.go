package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// pageSize is how many events a read fetches per query. Reads never hold a transaction while
// the caller handles events: a slow consumer must not pin the WAL.
const pageSize = 512

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		fail := func(err error) { yield(eventstore.RecordedEvent{}, fmt.Errorf("read %s: %w", stream, err)) }
		if err := eventstore.ValidateStream(stream); err != nil {
			yield(eventstore.RecordedEvent{}, err)
			return
		}
		if err := s.usable(ctx); err != nil {
			fail(err)
			return
		}
		var id int64
		err := s.rdb.QueryRowContext(ctx, `SELECT id FROM streams WHERE name = ? AND deleted = 0`, stream).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			fail(eventstore.ErrStreamNotFound)
			return
		}
		if err != nil {
			fail(err)
			return
		}

		query := `SELECT position, id, revision, type, data, metadata, recorded FROM events
			WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?`
		if opts.Direction == eventstore.Backwards {
			query = `SELECT position, id, revision, type, data, metadata, recorded FROM events
				WHERE stream_id = ? AND revision <= ? ORDER BY revision DESC LIMIT ?`
		}
		next, left := opts.From, opts.Limit
		for {
			n := uint64(pageSize)
			if left > 0 {
				n = min(n, left)
			}
			// SQLite integers are signed: End (MaxUint64) becomes the largest int64.
			page, err := s.page(ctx, query, stream, id, int64(min(next, 1<<63-1)), n)
			if err != nil {
				fail(err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if left > 0 {
				left -= uint64(len(page))
				if left == 0 {
					return
				}
			}
			if uint64(len(page)) < n {
				return
			}
			last := page[len(page)-1].Revision
			if opts.Direction == eventstore.Backwards {
				if last == 0 {
					return
				}
				next = last - 1
			} else {
				next = last + 1
			}
		}
	}
}

// ReadAll implements eventstore.Feed.
func (s *Store) ReadAll(ctx context.Context, opts eventstore.ReadAllOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		after := opts.From.Commit
		if after > 0 {
			after-- // From is inclusive
		}
		left := opts.Limit
		for e, err := range s.log(ctx, after, opts.Filter, false) {
			if !yield(e, err) || err != nil {
				return
			}
			if left > 0 {
				if left--; left == 0 {
					return
				}
			}
		}
	}
}

// SubscribeAll implements eventstore.Feed.
func (s *Store) SubscribeAll(ctx context.Context, opts eventstore.SubscribeOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return s.log(ctx, opts.After.Commit, opts.Filter, true)
}

// log yields the events after position after that filter selects; when follow is set it then
// waits for commits instead of ending.
func (s *Store) log(ctx context.Context, after uint64, filter eventstore.Filter, follow bool) iter.Seq2[eventstore.RecordedEvent, error] {
	const query = `SELECT e.position, e.id, e.revision, e.type, e.data, e.metadata, e.recorded, s.name
		FROM events e JOIN streams s ON s.id = e.stream_id
		WHERE e.position > ? ORDER BY e.position LIMIT ?`
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		fail := func(err error) { yield(eventstore.RecordedEvent{}, fmt.Errorf("read log after %d: %w", after, err)) }
		for {
			if err := s.usable(ctx); err != nil {
				fail(err)
				return
			}
			// Take the channel before reading: a commit after the read closes it.
			changed := s.changes()
			page, err := s.page(ctx, query, "", 0, int64(after), pageSize)
			if err != nil {
				fail(err)
				return
			}
			for _, e := range page {
				after = e.Position.Commit
				if filter.Match(e.Stream) && !yield(e, nil) {
					return
				}
			}
			if len(page) == pageSize {
				continue
			}
			if !follow {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				fail(ctx.Err())
				return
			case <-s.closing:
				fail(eventstore.ErrClosed)
				return
			}
		}
	}
}

// page runs one page query. For stream reads the stream's name and id are given; log reads
// select the name as the last column. It talks to the driver directly: database/sql's Scan
// would convert and copy every column through reflection, which was most of a read's cost.
func (s *Store) page(ctx context.Context, query, stream string, streamID, from int64, n uint64) ([]eventstore.RecordedEvent, error) {
	args := []driver.NamedValue{{Ordinal: 1, Value: streamID}, {Ordinal: 2, Value: from}, {Ordinal: 3, Value: int64(n)}}
	if streamID == 0 {
		args = []driver.NamedValue{{Ordinal: 1, Value: from}, {Ordinal: 2, Value: int64(n)}}
	}
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	page := make([]eventstore.RecordedEvent, 0, min(n, pageSize))
	err = conn.Raw(func(dc any) error {
		rows, err := dc.(driver.QueryerContext).QueryContext(ctx, query, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		row := make([]driver.Value, len(rows.Columns()))
		for {
			if err := rows.Next(row); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			e, err := recorded(row, stream)
			if err != nil {
				return err
			}
			page = append(page, e)
		}
	})
	return page, err
}

// recorded builds an event from a row of (position, id, revision, type, data, metadata,
// recorded[, stream name]).
func recorded(row []driver.Value, stream string) (eventstore.RecordedEvent, error) {
	pos, _ := row[0].(int64)
	id, err := uuid.FromBytes(asBytes(row[1]))
	if err != nil {
		return eventstore.RecordedEvent{}, fmt.Errorf("event at %d: id: %w", pos, err)
	}
	rev, _ := row[2].(int64)
	nanos, _ := row[6].(int64)
	if len(row) > 7 {
		stream = string(asBytes(row[7]))
	}
	return eventstore.RecordedEvent{
		ID:       id,
		Stream:   stream,
		Revision: uint64(rev),
		Position: position(uint64(pos)),
		Type:     string(asBytes(row[3])),
		Data:     ownBytes(row[4]),
		Metadata: ownBytes(row[5]),
		Recorded: time.Unix(0, nanos).UTC(),
	}, nil
}

// asBytes returns a TEXT or BLOB column's bytes; drivers hand out either []byte or string.
func asBytes(v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	return nil
}

// ownBytes returns a BLOB column's bytes for the caller to keep, copying them only if the
// driver may reuse its buffer (see driverOwnsBlobs).
func ownBytes(v any) []byte {
	b := asBytes(v)
	if driverOwnsBlobs {
		return b
	}
	return bytes.Clone(b)
}
