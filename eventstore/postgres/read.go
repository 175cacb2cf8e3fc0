package postgres

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// pageSize is how many events a read fetches per query. Reads hold no connection and no
// transaction while the caller handles events: a slow consumer must not hold the pool.
const pageSize = 512

// pollInterval is how long a subscription that has caught up waits, at most, before it reads
// again without a wake-up: the bound on a stall after a lost notification.
const pollInterval = time.Second

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		if err := validStream(stream); err != nil {
			yield(eventstore.RecordedEvent{}, err)
			return
		}
		if err := s.usable(ctx); err != nil {
			yield(eventstore.RecordedEvent{}, fmt.Errorf("read %s: %w", stream, err))
			return
		}
		backwards := opts.Direction == eventstore.Backwards
		next, left := opts.From, opts.Limit
		for first := true; ; first = false {
			n := uint64(pageSize)
			if left > 0 {
				n = min(n, left)
			}
			page, err := s.streamPage(ctx, stream, backwards, next, int(n), first)
			if err != nil {
				yield(eventstore.RecordedEvent{}, s.fault(ctx, fmt.Errorf("read %s: %w", stream, err)))
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if left > 0 {
				if left -= uint64(len(page)); left == 0 {
					return
				}
			}
			if uint64(len(page)) < n {
				return
			}
			last := page[len(page)-1].Revision
			if backwards && last == 0 {
				return
			}
			next = last + 1
			if backwards {
				next = last - 1
			}
		}
	}
}

// young keeps the events of a stream read that are not past the stream's maximum age, which
// it looks up once per query.
const young = `recorded > coalesce((SELECT now() - max_age FROM streams WHERE name = $1), '-infinity')`

// streamPage returns up to n events of stream from revision from on, leaving out those past
// the stream's maximum age. If the first page is empty it asks whether the stream is live: a
// missing, deleted or expired stream has no events, but neither has a read past the end of a
// live one.
func (s *Store) streamPage(ctx context.Context, stream string, backwards bool, from uint64, n int, first bool) ([]eventstore.RecordedEvent, error) {
	query := `SELECT position, id, revision, type, data, metadata, recorded FROM events
		WHERE stream = $1 AND revision >= $2 AND ` + young + ` ORDER BY revision LIMIT $3`
	if backwards {
		query = `SELECT position, id, revision, type, data, metadata, recorded FROM events
		WHERE stream = $1 AND revision <= $2 AND ` + young + ` ORDER BY revision DESC LIMIT $3`
	}
	// Revisions are bigint: End (MaxUint64) becomes the largest of them.
	rows, err := s.pool.Query(ctx, query, stream, int64(min(from, math.MaxInt64)), n)
	if err != nil {
		return nil, err
	}
	page := make([]eventstore.RecordedEvent, 0, min(n, 64))
	var e eventstore.RecordedEvent
	var pos, rev int64
	_, err = pgx.ForEachRow(rows, []any{&pos, &e.ID, &rev, &e.Type, &e.Data, &e.Metadata, &e.Recorded}, func() error {
		e.Stream, e.Revision, e.Position, e.Recorded = stream, uint64(rev), position(pos), e.Recorded.UTC()
		page = append(page, e)
		return nil
	})
	if err != nil || len(page) > 0 || !first {
		return page, err
	}
	var live bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM streams WHERE name = $1 AND NOT deleted
		AND (expires_at IS NULL OR expires_at > now()))`, stream).Scan(&live); err != nil {
		return nil, err
	}
	if !live {
		return nil, eventstore.ErrStreamNotFound
	}
	return nil, nil
}

// ReadAll implements eventstore.Feed.
func (s *Store) ReadAll(ctx context.Context, opts eventstore.ReadAllOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	after := opts.From.Commit
	if after > 0 {
		after-- // From is inclusive
	}
	return s.log(ctx, after, opts.Filter, opts.Limit, false)
}

// SubscribeAll implements eventstore.Feed.
func (s *Store) SubscribeAll(ctx context.Context, opts eventstore.SubscribeOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return s.log(ctx, opts.After.Commit, opts.Filter, 0, true)
}

// log yields up to limit (0: no limit) events after position after that filter selects; when
// follow is set it then waits for commits instead of ending.
func (s *Store) log(ctx context.Context, after uint64, filter eventstore.Filter, limit uint64, follow bool) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		fail := func(err error) {
			yield(eventstore.RecordedEvent{}, s.fault(ctx, fmt.Errorf("read log after %d: %w", after, err)))
		}
		if err := validFilter(filter); err != nil {
			yield(eventstore.RecordedEvent{}, err)
			return
		}
		for left := limit; ; {
			if err := s.usable(ctx); err != nil {
				fail(err)
				return
			}
			// Taken before the read: a commit after it closes the channel.
			changed := s.changes()
			n := uint64(pageSize)
			if left > 0 {
				n = min(n, left)
			}
			page, head, err := s.logPage(ctx, after, filter, int(n))
			if err != nil {
				fail(err)
				return
			}
			for _, e := range page {
				after = e.Position.Commit
				if !yield(e, nil) {
					return
				}
			}
			if left > 0 {
				if left -= uint64(len(page)); left == 0 {
					return
				}
			}
			if uint64(len(page)) == n {
				continue
			}
			// The page holds every selected event up to the head its snapshot saw.
			after = max(after, head)
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

// logQuery reads a page of the log that a filter selects, bounded by the head that its
// snapshot sees, which it returns in every row; without events it returns one row with the
// head alone (see the package documentation).
const logQuery = `SELECT h.position, e.position, e.id, e.stream, e.revision, e.type, e.data, e.metadata, e.recorded
	FROM log_head h LEFT JOIN LATERAL (
		SELECT * FROM events
		WHERE position > $1 AND position <= h.position
			AND (cardinality($2::text[]) = 0 OR stream ^@ ANY ($2::text[]))
			AND NOT stream ^@ ANY ($3::text[])
		ORDER BY position LIMIT $4
	) e ON true
	ORDER BY e.position`

// logPage returns up to n events after position after that filter selects, and the head of
// the log as the read saw it.
func (s *Store) logPage(ctx context.Context, after uint64, filter eventstore.Filter, n int) ([]eventstore.RecordedEvent, uint64, error) {
	include, exclude := filter.StreamPrefixes, filter.ExcludeStreamPrefixes
	// A nil slice is a NULL array, which would select nothing.
	if include == nil {
		include = []string{}
	}
	if exclude == nil {
		exclude = []string{}
	}
	rows, err := s.pool.Query(ctx, logQuery, int64(min(after, math.MaxInt64)), include, exclude, n)
	if err != nil {
		return nil, 0, err
	}
	page := make([]eventstore.RecordedEvent, 0, min(n, 64))
	var (
		head           int64
		pos, rev       pgtype.Int8
		id             pgtype.UUID
		stream, typ    pgtype.Text
		data, metadata []byte
		recorded       pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&head, &pos, &id, &stream, &rev, &typ, &data, &metadata, &recorded}, func() error {
		if pos.Valid {
			page = append(page, eventstore.RecordedEvent{
				ID: id.Bytes, Stream: stream.String, Revision: uint64(rev.Int64), Position: position(pos.Int64),
				Type: typ.String, Data: data, Metadata: metadata, Recorded: recorded.Time.UTC(),
			})
		}
		return nil
	})
	return page, uint64(head), err
}

// wait waits for changed to close (a commit, here or in another process), or for the poll
// interval (pollInterval) to pass.
func (s *Store) wait(ctx context.Context, changed <-chan struct{}) error {
	t := time.NewTimer(s.cfg.poll)
	defer t.Stop()
	select {
	case <-changed:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return eventstore.ErrClosed
	}
}
