package projections

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// AsOf is a point of the log: the events up to a position, or up to a time.
type AsOf struct {
	// Position, if not zero: the events at or before its commit position.
	Position eventstore.Position
	// Time, if Position is zero: the events up to the first one recorded after it.
	Time time.Time
}

// includes reports whether e is at or before the point.
func (a AsOf) includes(e eventstore.RecordedEvent) bool {
	if a.Position != (eventstore.Position{}) {
		return e.Position.Commit <= a.Position.Commit
	}
	return !e.Recorded.After(a.Time)
}

// Exported is what an export applied.
type Exported struct {
	Events       uint64              // events of the projection's streams read and applied
	Last         eventstore.Position // the position of the last of them; zero if none
	LastRecorded time.Time           // when it was recorded
}

// exportBatch is the events applied per transaction of an export: memory holds one batch.
const exportBatch = 10_000

// Export builds p as it stood at asOf into db, a new database: its tables under their base
// names (no generations, no views), from position 0 of feed, plus a table export_info that
// says what the file holds. It reads the log and writes only db: the live read models are
// not touched. A log whose recorded times go back and forth (a clock set back) ends a time
// export at the first event recorded after the time.
func Export(ctx context.Context, feed eventstore.Feed, p Projection, db *sql.DB, asOf AsOf) (Exported, error) {
	var out Exported
	t := Tables{}
	for _, name := range p.Tables() {
		t[name] = name
	}
	err := inTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE export_info (projection TEXT NOT NULL, version INTEGER NOT NULL,
			as_of_position INTEGER, as_of_time TEXT, events INTEGER NOT NULL, last_position INTEGER NOT NULL,
			last_recorded TEXT) STRICT`); err != nil {
			return err
		}
		return p.Create(ctx, tx, t)
	})
	if err != nil {
		return out, fmt.Errorf("export %s: create tables: %w", p.Name(), err)
	}
	batch := make([]eventstore.RecordedEvent, 0, exportBatch)
	apply := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := inTx(ctx, db, func(tx *sql.Tx) error { return p.Apply(ctx, tx, t, batch) })
		if err != nil {
			return fmt.Errorf("export %s: apply events %v..%v: %w", p.Name(), batch[0].Position, batch[len(batch)-1].Position, err)
		}
		clear(batch)
		batch = batch[:0]
		return nil
	}
	for e, err := range feed.ReadAll(ctx, eventstore.ReadAllOptions{Filter: p.Filter()}) {
		if err != nil {
			return out, fmt.Errorf("export %s: read the log: %w", p.Name(), err)
		}
		if !asOf.includes(e) {
			break
		}
		batch = append(batch, e)
		out.Events, out.Last, out.LastRecorded = out.Events+1, e.Position, e.Recorded
		if len(batch) == cap(batch) {
			if err := apply(); err != nil {
				return out, err
			}
		}
	}
	if err := apply(); err != nil {
		return out, err
	}
	return out, writeExportInfo(ctx, db, p, asOf, out)
}

func writeExportInfo(ctx context.Context, db *sql.DB, p Projection, asOf AsOf, out Exported) error {
	var pos, at, last any
	if asOf.Position != (eventstore.Position{}) {
		pos = asOf.Position.Commit
	} else {
		at = stamp(asOf.Time)
	}
	if !out.LastRecorded.IsZero() {
		last = stamp(out.LastRecorded)
	}
	_, err := db.ExecContext(ctx, `INSERT INTO export_info (projection, version, as_of_position, as_of_time, events, last_position,
		last_recorded) VALUES (?, ?, ?, ?, ?, ?, ?)`, p.Name(), p.Version(), pos, at, out.Events, out.Last.Commit, last)
	if err != nil {
		return fmt.Errorf("export %s: %w", p.Name(), err)
	}
	return nil
}

func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
