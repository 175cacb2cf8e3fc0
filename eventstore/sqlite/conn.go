package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
)

// checkpointPages is how many pages of WAL a connection that commits lets grow before it
// checkpoints them into the database file, rather than SQLite's 1,000: pages that change again
// before the checkpoint are copied once. It raised concurrent appends from about 20,000 to
// 25,000 events/s here, and for the read models it took checkpoint writes from 0.67 to 0.22
// per append under the load (docs/benchmarks.md). The store's writer does not checkpoint in
// its commits at all (see Store.checkpointer).
const checkpointPages = "10000"

// The page cache of a connection, in KiB (SQLite's cache_size, negated). A connection that
// commits has a small one, on purpose: a commit that splits a B-tree page swaps page numbers
// through a spare one past the end of the file (balance_nonroot), and the pager then frees the
// pages past the end by walking the connection's whole page cache. With 16 MiB the walk was
// 2.3–2.9% of the server's processor time under keyed creates, 0.6–0.8% with 4 MiB, for
// 0.2–0.3% more spent reading again pages the cache no longer held, from the file's memory map
// or the WAL (perf, docs/benchmarks.md). The store's readers of streams, which read the file
// without the map, keep a larger cache.
const (
	commitCacheKiB = 4000
	readCacheKiB   = 16000
)

// writeConn is the writer's driver connection and its prepared statements. It speaks
// database/sql/driver, so it works with any SQLite driver.
type writeConn struct {
	conn driver.Conn

	stream, insertStream, updateStream, deleteStream driverStmt
	claimStream, unclaimStream, setExpiry            driverStmt
	insertEvent, findEvent, eventsFrom, deleteEvents driverStmt
	deleteEventsBefore, forgetStreams, expired       driverStmt
	checkpoint, walFrames                            driverStmt

	args []driver.NamedValue // exec's, kept from one statement to the next
}

// newWriteConn prepares the writer's statements on dc. walLimit is the size in bytes the WAL
// file is cut back to when it starts over (see walSizeLimit).
func newWriteConn(dc any, walLimit int64) (*writeConn, error) {
	conn, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("driver connection %T is not a driver.Conn", dc)
	}
	w := &writeConn{conn: conn}
	// The writer copies the WAL between its transactions, never in a commit (see
	// Store.checkpointer).
	for _, pragma := range []string{`PRAGMA wal_autocheckpoint = 0`, fmt.Sprintf(`PRAGMA journal_size_limit = %d`, walLimit)} {
		if err := w.execOnce(pragma); err != nil {
			return nil, err
		}
	}
	for _, p := range []struct {
		stmt *driverStmt
		sql  string
	}{
		{&w.stream, `SELECT id, first_revision, last_revision, deleted,
			(SELECT max(revision) FROM events WHERE stream_id = streams.id), max_age, expires_at
			FROM streams WHERE name = ?`},
		{&w.insertStream, `INSERT INTO streams (name, first_revision, last_revision, max_age, expires_at)
			VALUES (?, 0, ?, ?, ?)`},
		{&w.claimStream, `INSERT INTO streams (name, first_revision, last_revision, max_age, expires_at)
			VALUES (?, 0, ?, ?, ?) ON CONFLICT (name) DO NOTHING`},
		{&w.unclaimStream, `DELETE FROM streams WHERE id = ?`},
		{&w.updateStream, `UPDATE streams SET first_revision = ?, last_revision = ?, deleted = 0,
			max_age = ?, expires_at = ? WHERE id = ?`},
		{&w.setExpiry, `UPDATE streams SET max_age = ?, expires_at = ? WHERE id = ?`},
		{&w.deleteStream, `UPDATE streams SET last_revision = ?, deleted = 1, deleted_at = ?, expires_at = NULL
			WHERE id = ?`},
		{&w.forgetStreams, `DELETE FROM streams WHERE id IN
			(SELECT id FROM streams WHERE deleted = 1 AND deleted_at < ? LIMIT 64) RETURNING name`},
		{&w.expired, `SELECT name FROM streams WHERE expires_at <= ? ORDER BY expires_at
			LIMIT ` + strconv.Itoa(expiredChunk)},
		{&w.insertEvent, `INSERT INTO events (id, stream_id, revision, type, data, metadata, recorded)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`},
		{&w.findEvent, `SELECT stream_id, revision FROM events WHERE id = ?`},
		{&w.eventsFrom, `SELECT id, revision, position FROM events
			WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?`},
		{&w.deleteEvents, `DELETE FROM events WHERE stream_id = ?`},
		{&w.deleteEventsBefore, `DELETE FROM events WHERE stream_id = ? AND revision < ?`},
		{&w.checkpoint, `PRAGMA wal_checkpoint(PASSIVE)`},
		{&w.walFrames, `PRAGMA wal_checkpoint(NOOP)`},
	} {
		st, err := conn.Prepare(p.sql)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		p.stmt.stmt = st
	}
	return w, nil
}

// walSizeLimit is the size in bytes the WAL file is cut back to when it starts over, after a
// reader kept it from doing so for a while: at least 128 MiB, and half again what a round of
// checkpointFrames frames of 4 KiB pages takes, which the WAL reaches between two copies
// (about 110 MB under the load, docs/benchmarks.md), so that it is not cut and grown again
// each time.
func walSizeLimit(checkpointFrames int) int64 {
	const frame = 4096 + 24 // a page and its frame header
	return max(128<<20, int64(checkpointFrames)*frame*3/2)
}

// execOnce prepares, runs and closes a statement that returns no rows the writer needs.
func (w *writeConn) execOnce(query string) error {
	st, err := w.conn.Prepare(query)
	if err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	defer st.Close()
	if _, err := (driverStmt{st}).query(); err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	return nil
}

// walState is how many frames the WAL holds, and how many of them are in the database file.
// Both fall only when the WAL starts over.
type walState struct{ frames, copied int64 }

// copyWAL copies into the database file what the WAL holds beyond what was copied (as much
// as the readers allow). ok is false if it failed or another copy was under way.
func (w *writeConn) copyWAL() (walState, bool) { return walResult(w.checkpoint.query()) }

// lookAtWAL reads the WAL's state, copying nothing.
func (w *writeConn) lookAtWAL() (walState, bool) { return walResult(w.walFrames.query()) }

// walResult reads a wal_checkpoint pragma's row: busy, frames, copied.
func walResult(rows [][]driver.Value, err error) (walState, bool) {
	if err != nil || len(rows) != 1 || len(rows[0]) != 3 || asInt(rows[0][0]) != 0 {
		return walState{}, false
	}
	return walState{frames: asInt(rows[0][1]), copied: asInt(rows[0][2])}, true
}

func (w *writeConn) close() {
	for _, st := range []driverStmt{w.stream, w.insertStream, w.claimStream, w.unclaimStream, w.updateStream, w.setExpiry,
		w.deleteStream, w.insertEvent, w.findEvent, w.eventsFrom, w.deleteEvents, w.deleteEventsBefore, w.forgetStreams,
		w.expired, w.checkpoint, w.walFrames} {
		if st.stmt != nil {
			st.stmt.Close()
		}
	}
}

func (w *writeConn) begin() (driver.Tx, error) {
	if b, ok := w.conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(context.Background(), driver.TxOptions{})
	}
	return w.conn.Begin() //lint:ignore SA1019 fallback for drivers without BeginTx
}

// exec runs st with args, which the driver reads before it returns.
func (w *writeConn) exec(st driverStmt, args ...any) (driver.Result, error) {
	w.args = appendNamed(w.args[:0], args)
	defer clear(w.args) // let the values go
	return st.stmt.(driver.StmtExecContext).ExecContext(context.Background(), w.args)
}

// driverStmt is a prepared statement used without database/sql.
type driverStmt struct{ stmt driver.Stmt }

// query returns every row; the writer's queries return a few.
func (st driverStmt) query(args ...any) ([][]driver.Value, error) {
	rows, err := st.stmt.(driver.StmtQueryContext).QueryContext(context.Background(), named(args))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]driver.Value
	for {
		row := make([]driver.Value, len(rows.Columns()))
		if err := rows.Next(row); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
}

// named converts arguments to the driver's values: integers to int64.
func named(args []any) []driver.NamedValue {
	return appendNamed(make([]driver.NamedValue, 0, len(args)), args)
}

// appendNamed appends arguments to nv as the driver's values: integers as int64.
func appendNamed(nv []driver.NamedValue, args []any) []driver.NamedValue {
	for i, a := range args {
		switch v := a.(type) {
		case int:
			a = int64(v)
		case uint64:
			a = int64(v)
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return nv
}

// asInt returns an INTEGER column's value.
func asInt(v driver.Value) int64 {
	i, _ := v.(int64)
	return i
}

// readConnector opens reader connections with their statements prepared. Unless mmap is
// set, a connection reads the file with pread instead of mapping it (see Store.logs).
type readConnector struct {
	driver.Connector
	mmap bool
}

func (c readConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if !c.mmap {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			dc.Close()
			return nil, fmt.Errorf("driver connection %T cannot execute a statement directly", dc)
		}
		if _, err := ex.ExecContext(ctx, `PRAGMA mmap_size = 0`, nil); err != nil {
			dc.Close()
			return nil, fmt.Errorf("set mmap_size: %w", err)
		}
	}
	r, err := newReadConn(dc)
	if err != nil {
		dc.Close()
		return nil, err
	}
	return r, nil
}

// readConn is a reader connection and its prepared statements. The reader pool keeps its
// connections for the store's life, so a read's statements are parsed and planned once per
// connection, not once per read.
type readConn struct {
	driver.Conn

	// streamForwards and streamBackwards read a page of a live stream's events by the
	// stream's name, but those past its maximum age: one statement, whose empty result leaves
	// streamExists to tell a missing or expired stream from a range without events. (A
	// deleted stream's events are gone, see writeTx.delete.)
	streamForwards, streamBackwards, streamExists driverStmt
	// log reads a page of the global log.
	log driverStmt

	// types holds the event types read so far, so that reading an event's type does not
	// allocate it again.
	types map[string]string
}

// eventColumns are the columns that readConn.recorded reads, in its order. The id, type, data
// and metadata come as one BLOB that recorded cuts at the lengths of the type and data
// (metadata is NULL or not empty, see writeTx.write): the driver allocates every TEXT or BLOB
// value twice, its bytes and its interface, so one column instead of four took a read from
// 10.5 to 4.5 allocations per event.
const eventColumns = `e.position, e.revision, e.recorded, octet_length(e.type), octet_length(e.data),
	CAST(e.id || e.type || e.data || ifnull(e.metadata, x'') AS BLOB)`

// young keeps the events of a stream read (s, e) that are not past its maximum age at the time
// of the read, its third parameter: see eventstore.StreamAppend.MaxAge.
const young = `(s.max_age IS NULL OR e.recorded > ? - s.max_age)`

func newReadConn(dc driver.Conn) (*readConn, error) {
	r := &readConn{Conn: dc, types: map[string]string{}}
	// SQLite's planner may read a bound parameter's value (a LIMIT ?, or col = ? to estimate
	// its selectivity) and then marks the statement to be prepared again when that parameter
	// is bound anew; mattn/go-sqlite3 clears all bindings before every query, so such a
	// statement was parsed and planned again on every read, which cost more than reading a
	// short stream. Hence the page size is written into the statements (a read that wants
	// fewer rows stops stepping, see readConn.events), and an equality on a parameter names
	// its collation: BINARY is the column's own, so the name index still serves it, but the
	// planner no longer looks at the value.
	limit := " LIMIT " + strconv.Itoa(pageSize)
	// CROSS JOIN keeps streams as the outer loop: one lookup by name, then a range of the
	// (stream_id, revision) index. The time a read is made at is a parameter too, in terms
	// that no index serves (+expires_at), so that the planner has no use for its value.
	for _, p := range []struct {
		stmt *driverStmt
		sql  string
	}{
		{&r.streamForwards, `SELECT ` + eventColumns + ` FROM streams s CROSS JOIN events e
			ON e.stream_id = s.id WHERE s.name = ? COLLATE BINARY AND s.deleted = 0 AND e.revision >= ?
			AND ` + young + ` ORDER BY e.revision` + limit},
		{&r.streamBackwards, `SELECT ` + eventColumns + ` FROM streams s CROSS JOIN events e
			ON e.stream_id = s.id WHERE s.name = ? COLLATE BINARY AND s.deleted = 0 AND e.revision <= ?
			AND ` + young + ` ORDER BY e.revision DESC` + limit},
		{&r.streamExists, `SELECT 1 FROM streams WHERE name = ? COLLATE BINARY AND deleted = 0
			AND (expires_at IS NULL OR +expires_at > ?)`},
		{&r.log, `SELECT ` + eventColumns + `, s.name FROM events e JOIN streams s ON s.id = e.stream_id
			WHERE e.position > ? ORDER BY e.position` + limit},
	} {
		st, err := dc.Prepare(p.sql)
		if err != nil {
			r.closeStmts()
			return nil, fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		p.stmt.stmt = st
	}
	return r, nil
}

func (r *readConn) Close() error {
	r.closeStmts()
	return r.Conn.Close()
}

func (r *readConn) closeStmts() {
	for _, st := range []driverStmt{r.streamForwards, r.streamBackwards, r.streamExists, r.log} {
		if st.stmt != nil {
			st.stmt.Close()
		}
	}
}
