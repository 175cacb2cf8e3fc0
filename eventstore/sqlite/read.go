package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
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
		backwards := opts.Direction == eventstore.Backwards
		next, left := opts.From, opts.Limit
		var page []eventstore.RecordedEvent
		for first := true; ; first = false {
			n := uint64(pageSize)
			if left > 0 {
				n = min(n, left)
			}
			if page == nil {
				// Most streams are short: grow to a full page only when one is.
				page = make([]eventstore.RecordedEvent, 0, min(n, 64))
			}
			var err error
			page, err = s.streamPage(ctx, stream, backwards, next, int(n), first, page[:0])
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
			if backwards {
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
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		fail := func(err error) { yield(eventstore.RecordedEvent{}, fmt.Errorf("read log after %d: %w", after, err)) }
		// A subscription that keeps up reads a few events at a time: grow to a full page only
		// when there is one.
		page := make([]eventstore.RecordedEvent, 0, 64)
		for {
			if err := s.usable(ctx); err != nil {
				fail(err)
				return
			}
			// Take the channel before reading: a commit after the read closes it.
			changed := s.changes()
			if live, more, ok := s.liveTail(follow, after); ok {
				// Caught up: fed from memory, as long as it keeps up.
				for _, e := range live {
					after = e.Position.Commit
					if filter.Match(e.Stream) && !yield(e, nil) {
						return
					}
				}
				if more {
					continue
				}
				if err := s.wait(ctx, changed); err != nil {
					fail(err)
					return
				}
				continue
			}
			err := s.read(ctx, s.logs, func(c *readConn) error {
				var err error
				page, err = c.events(ctx, c.log, "", page[:0], pageSize, int64(after))
				return err
			})
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
			if err := s.wait(ctx, changed); err != nil {
				fail(err)
				return
			}
		}
	}
}

// liveTail returns the tail's events after position after, for a subscription (follow) that
// the tail can feed, and whether it holds more after them (see tail.since).
func (s *Store) liveTail(follow bool, after uint64) (events []eventstore.RecordedEvent, more, ok bool) {
	if !follow {
		return nil, false, false
	}
	return s.tail.since(after)
}

// wait waits for changed to close: for the next commit.
func (s *Store) wait(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return eventstore.ErrClosed
	}
}

// streamPage appends to page up to n events of stream from revision from on, leaving out
// those past the stream's maximum age. If the first page is empty it asks, on the same
// connection, whether the stream exists (and has not expired).
func (s *Store) streamPage(ctx context.Context, stream string, backwards bool, from uint64, n int, first bool, page []eventstore.RecordedEvent) ([]eventstore.RecordedEvent, error) {
	now := time.Now().UnixNano()
	err := s.read(ctx, s.rdb, func(c *readConn) error {
		stmt := c.streamForwards
		if backwards {
			stmt = c.streamBackwards
		}
		var err error
		// SQLite integers are signed: End (MaxUint64) becomes the largest int64.
		page, err = c.events(ctx, stmt, stream, page, n, stream, int64(min(from, 1<<63-1)), now)
		if err != nil || len(page) > 0 || !first {
			return err
		}
		exists, err := c.exists(ctx, stream, now)
		if err == nil && !exists {
			err = eventstore.ErrStreamNotFound
		}
		return err
	})
	return page, err
}

// Ping implements eventstore.Store: a reader connection asks the file whether a stream exists.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if err := s.read(ctx, s.rdb, func(c *readConn) error { _, err := c.exists(ctx, "", 0); return err }); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// read runs f on a reader connection of pool.
func (s *Store) read(ctx context.Context, pool *sql.DB, f func(*readConn) error) error {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error { return f(dc.(*readConn)) })
}

// events runs a page query and appends up to n of its events to page. For stream reads the
// stream's name is given; log reads select it as the last column. It talks to the driver
// directly: database/sql's Scan would convert and copy every column through reflection, which
// was most of a read's cost.
func (c *readConn) events(ctx context.Context, stmt driverStmt, stream string, page []eventstore.RecordedEvent, n int, args ...any) ([]eventstore.RecordedEvent, error) {
	rows, err := stmt.stmt.(driver.StmtQueryContext).QueryContext(ctx, named(args))
	if err != nil {
		return page, err
	}
	defer rows.Close()
	row := make([]driver.Value, len(rows.Columns()))
	for range n {
		if err := rows.Next(row); err == io.EOF {
			return page, nil
		} else if err != nil {
			return page, err
		}
		e, err := c.recorded(row, stream)
		if err != nil {
			return page, err
		}
		page = append(page, e)
	}
	return page, nil
}

// exists reports whether stream is live at now (Unix nanoseconds): not deleted, nor expired.
func (c *readConn) exists(ctx context.Context, stream string, now int64) (bool, error) {
	rows, err := c.streamExists.stmt.(driver.StmtQueryContext).QueryContext(ctx, named([]any{stream, now}))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	err = rows.Next(make([]driver.Value, 1))
	if err == io.EOF {
		return false, nil
	}
	return err == nil, err
}

// maxTypes bounds a reader's table of event types.
const maxTypes = 1000

// recorded builds an event from a row of eventColumns[, stream name].
func (c *readConn) recorded(row []driver.Value, stream string) (eventstore.RecordedEvent, error) {
	pos, _ := row[0].(int64)
	rev, _ := row[1].(int64)
	nanos, _ := row[2].(int64)
	typeLen, _ := row[3].(int64)
	dataLen, _ := row[4].(int64)
	b := ownBytes(row[5])
	if len(b) < 16+int(typeLen+dataLen) {
		return eventstore.RecordedEvent{}, fmt.Errorf("event at %d: %d bytes, want at least %d", pos, len(b), 16+typeLen+dataLen)
	}
	id, b := b[:16], b[16:]
	typ, b := b[:typeLen], b[typeLen:]
	// Capped, so that appending to one cannot write over the next.
	data, metadata := b[:dataLen:dataLen], b[dataLen:len(b):len(b)]
	if len(metadata) == 0 {
		metadata = nil
	}
	if len(row) > 6 {
		stream = asString(row[6])
	}
	return eventstore.RecordedEvent{
		ID:       uuid.UUID(id),
		Stream:   stream,
		Revision: uint64(rev),
		Position: position(uint64(pos)),
		Type:     c.eventType(typ),
		Data:     data,
		Metadata: metadata,
		Recorded: time.Unix(0, nanos).UTC(),
	}, nil
}

// eventType returns b as a string, without allocating it for a type it has seen.
func (c *readConn) eventType(b []byte) string {
	if t, ok := c.types[string(b)]; ok {
		return t
	}
	t := string(b)
	if len(c.types) < maxTypes {
		c.types[t] = t
	}
	return t
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

// asString returns a TEXT column's value; drivers hand out either string or []byte.
func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
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
