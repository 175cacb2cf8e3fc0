package postgres

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the channel of the NOTIFY that each transaction that writes events sends.
// Its scope is the database.
const notifyChannel = "orders_events"

// cancelGrace is how long past a transaction's deadline the writer waits for the server's
// statement timeout before it cancels the transaction itself: a cancel from the client closes
// the connection, while the server's timeout keeps it.
const cancelGrace = 250 * time.Millisecond

// tryCommit makes pending in one transaction, by due: it takes the write lock, forgets up to
// look expired streams (see expireQuery), reads what the requests need, decides each in memory
// (setting its outcome), writes the outcome of all and commits. It reports whether events were
// written. Its error is the transaction's: then nothing was written, whatever the requests'
// outcomes say.
func (s *Store) tryCommit(pending []*request, due time.Time, look int) (wrote bool, err error) {
	budget := time.Until(due)
	if budget <= 0 {
		return false, errWaitedOut
	}
	// The server times out each statement within the budget; the context, a little later, ends
	// a transaction whose statements took it together.
	ctx, cancel := context.WithDeadline(s.ctx, due.Add(cancelGrace))
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginQuery(budget)})
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after a commit, a no-op
	b, err := readBatch(ctx, tx, pending, look)
	if err != nil {
		return false, err
	}
	b.forgetExpired()
	for _, r := range pending {
		b.apply(r)
	}
	if err := b.flush(ctx, tx, s.id, cmp.Or(s.cfg.KeepDeleted, DefaultKeepDeleted)); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	if look > 0 {
		s.looked, s.moreExpired = time.Now(), b.expiredByLook == look
	}
	return len(b.inserts) > 0, nil
}

// expiryLook is how often, at most, a Store's writer looks for expired streams that no request
// names, to forget them (expireQuery), unless its last look left some. Every store on the
// database looks: one whose process stopped leaves its streams to the others.
const expiryLook = time.Second

// look is how many expired streams the writer's next transaction, of n requests, forgets
// besides those they name: 0 until expiryLook after the last look, unless that left some.
func (s *Store) look(n int) int {
	if !s.moreExpired && time.Since(s.looked) < expiryLook {
		return 0
	}
	return expiredChunk * n
}

// expiredChunk is how many expired streams a transaction forgets for each of its requests, at
// most, besides those the requests name; it forgets up to 64 rows of streams deleted before
// Config.KeepDeleted for each delete and for each expiredChunk streams expired.
const expiredChunk = 64

// expireQuery forgets up to $1 expired streams, the longest expired first: it deletes their
// events and keeps their rows as deleted since they expired, as batch.forgetExpired does with
// those the requests name. It runs before the batch's rows are read, which then find them
// deleted.
const expireQuery = `WITH expired AS (
		UPDATE streams SET deleted = true, deleted_at = expires_at, expires_at = NULL
		WHERE name IN (SELECT name FROM streams WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)
		RETURNING name
	), gone AS (
		DELETE FROM events e USING expired x WHERE e.stream = x.name
	)
	SELECT count(*) FROM expired`

// beginQuery begins a writing transaction at READ COMMITTED, whatever the server's default:
// each statement after the lock must see what the writers before committed (see the package
// documentation). Its statements are bounded by budget, in the same round trip; a statement
// timeout of 0 would be none.
func beginQuery(budget time.Duration) string {
	return fmt.Sprintf("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = %d", max(budget.Milliseconds(), 1))
}

// readBatch takes the write lock and then, in one round trip, reads the log's head, forgets up
// to look expired streams (expireQuery) if look is above 0, and reads the rows of the streams
// that requests name, whether they have expired, and where their event ids are stored.
func readBatch(ctx context.Context, tx pgx.Tx, requests []*request, look int) (*batch, error) {
	b := newBatch()
	streams, ids := keys(requests)
	var q pgx.Batch
	q.Queue(`SELECT pg_advisory_xact_lock($1)`, writeLockKey)
	q.Queue(`SELECT position FROM log_head`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&b.head)
	})
	if look > 0 {
		q.Queue(expireQuery, look).QueryRow(func(row pgx.Row) error {
			return row.Scan(&b.expiredByLook)
		})
	}
	q.Queue(`SELECT name, first_revision, last_revision, deleted, coalesce(expires_at <= now(), false)
		FROM streams WHERE name = ANY($1)`, streams).Query(func(rows pgx.Rows) error {
		var name string
		var sr streamRow
		_, err := pgx.ForEachRow(rows, []any{&name, &sr.firstRevision, &sr.lastRevision, &sr.deleted, &sr.expired}, func() error {
			sr.exists = true
			b.streams[name] = sr
			return nil
		})
		return err
	})
	q.Queue(`SELECT id, stream, revision, position FROM events WHERE id = ANY($1)`, ids).Query(func(rows pgx.Rows) error {
		var id [16]byte
		var ref eventRef
		_, err := pgx.ForEachRow(rows, []any{&id, &ref.stream, &ref.revision, &ref.position}, func() error {
			b.ids[id] = ref
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, &q).Close(); err != nil {
		return nil, fmt.Errorf("read the batch's streams: %w", err)
	}
	b.read, b.expired = b.head, b.expiredByLook
	return b, nil
}

// flush writes what the batch decided, in one round trip: the deletes first (they never
// concern the events inserted after them: see drop), then the streams' rows, the events and
// the head, and the NOTIFY that wakes other stores' subscriptions once it commits, with the
// writing store's id, for its own listener to pass over. A batch that deleted or expired
// streams forgets the rows of up to 64 streams, for each delete and each expiredChunk streams
// expired, that were deleted more than keep ago (Config.KeepDeleted).
func (b *batch) flush(ctx context.Context, tx pgx.Tx, store string, keep time.Duration) error {
	var q pgx.Batch
	if len(b.gone) > 0 {
		streams, below := make([]string, 0, len(b.gone)), make([]int64, 0, len(b.gone))
		for stream, rev := range b.gone {
			streams, below = append(streams, stream), append(below, rev)
		}
		q.Queue(`DELETE FROM events e USING unnest($1::text[], $2::bigint[]) AS g (stream, below)
			WHERE e.stream = g.stream AND e.revision < g.below`, streams, below)
	}
	if len(b.changed) > 0 {
		b.queueStreams(&q)
	}
	if forgets := b.deletes + (b.expired+expiredChunk-1)/expiredChunk; forgets > 0 {
		q.Queue(`DELETE FROM streams WHERE name IN (SELECT name FROM streams
			WHERE deleted AND deleted_at < now() - $1 * interval '1 microsecond' LIMIT $2)`, keep.Microseconds(), 64*forgets)
	}
	if len(b.inserts) > 0 {
		b.queueInserts(&q)
		q.Queue(`SELECT pg_notify($1, $2)`, notifyChannel, store)
	}
	if b.head != b.read {
		q.Queue(`UPDATE log_head SET position = $1`, b.head)
	}
	if q.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &q).Close(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// queueStreams writes the rows of the streams the batch changed. A live stream's expiry moves
// to now() (its last event's recorded time) plus its maximum age, the append's or else the
// row's; a stream deleted as it expired counts as deleted since then.
func (b *batch) queueStreams(q *pgx.Batch) {
	n := len(b.changed)
	names, first, last := make([]string, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	deleted := make([]bool, 0, n)
	var maxAge []int64 // NULL, which unnest pads with NULLs, until an append gives an age
	for name := range b.changed {
		sr := b.streams[name]
		names, first, last = append(names, name), append(first, sr.firstRevision), append(last, sr.lastRevision)
		deleted = append(deleted, sr.deleted)
		if sr.maxAge != 0 && maxAge == nil {
			maxAge = make([]int64, len(names)-1, n)
		}
		if maxAge != nil {
			maxAge = append(maxAge, sr.maxAge)
		}
	}
	q.Queue(`INSERT INTO streams (name, first_revision, last_revision, deleted, deleted_at, max_age, expires_at)
		SELECT n, f, l, d, CASE WHEN d THEN now() END, a, CASE WHEN NOT d THEN now() + a END
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::boolean[], $5::bigint[]) AS u (n, f, l, d, m),
			LATERAL (SELECT nullif(m, 0) * interval '1 microsecond' AS a) AS age
		ON CONFLICT (name) DO UPDATE SET first_revision = excluded.first_revision,
			last_revision = excluded.last_revision, deleted = excluded.deleted,
			deleted_at = CASE WHEN excluded.deleted THEN least(now(), streams.expires_at) END,
			max_age = coalesce(excluded.max_age, streams.max_age),
			expires_at = CASE WHEN NOT excluded.deleted THEN now() + coalesce(excluded.max_age, streams.max_age) END`,
		names, first, last, deleted, maxAge)
}

// queueInserts inserts the batch's events in one statement, recorded at the transaction's
// start (now()).
func (b *batch) queueInserts(q *pgx.Batch) {
	n := len(b.inserts)
	positions, ids, streams, revisions := make([]int64, n), make([][16]byte, n), make([]string, n), make([]int64, n)
	types, data, metadata := make([]string, n), make([][]byte, n), make([][]byte, n)
	for i, e := range b.inserts {
		positions[i], ids[i], streams[i], revisions[i] = e.position, e.data.ID, e.stream, e.revision
		types[i], data[i] = e.data.Type, e.data.Data
		if len(e.data.Metadata) > 0 {
			metadata[i] = e.data.Metadata
		}
	}
	q.Queue(`INSERT INTO events (position, id, stream, revision, type, data, metadata, recorded)
		SELECT p, i, s, r, t, d, m, now()
		FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::bigint[], $5::text[], $6::bytea[], $7::bytea[]) AS u (p, i, s, r, t, d, m)`,
		positions, ids, streams, revisions, types, data, metadata)
}
