package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

const metaSchema = `CREATE TABLE IF NOT EXISTS projection_checkpoints (
	name              TEXT PRIMARY KEY,
	generation        INTEGER NOT NULL,
	commit_position   INTEGER NOT NULL,
	prepare_position  INTEGER NOT NULL,
	shadow_generation INTEGER,          -- a rebuild in progress
	shadow_commit     INTEGER,
	shadow_prepare    INTEGER,
	version           INTEGER NOT NULL DEFAULT 1, -- the projection's Version of the live generation
	shadow_version    INTEGER,                    -- and of the rebuild's
	shadow_mode       TEXT                        -- RebuildOptions.mode
) STRICT`

// prepare creates the checkpoint table, and generation 1 of every new projection, and starts
// the rebuild of every projection whose live generation is of another version.
func (r *Runner) prepare(ctx context.Context) error {
	if _, err := r.DB.ExecContext(ctx, metaSchema); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	if err := addVersions(ctx, r.DB); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	if err := addColumn(ctx, r.DB, "shadow_mode", "TEXT"); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	for _, rn := range r.runs {
		if err := rn.load(ctx); err != nil {
			return err
		}
	}
	return nil
}

// addVersions adds the version columns to a checkpoint table from before projections had
// versions: every generation in it was written at version 1.
func addVersions(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('projection_checkpoints') WHERE name = 'version'`).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN version INTEGER NOT NULL DEFAULT 1`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN shadow_version INTEGER`); err != nil {
		return err
	}
	return tx.Commit()
}

// addColumn adds a column to a checkpoint table from before it had it.
func addColumn(ctx context.Context, db *sql.DB, name, decl string) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('projection_checkpoints') WHERE name = ?`, name).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = db.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN `+name+` `+decl)
	return err
}

// load reads the projection's checkpoint, or creates its first generation. A live generation
// of another version is rebuilt at once; so is a rebuild in progress that another version
// started, since its tables are not this version's either.
func (rn *run) load(ctx context.Context) error {
	gen, version, shadowVersion := 1, rn.p.Version(), 0
	var c, p uint64
	var sg, sc, sp sql.NullInt64
	var mode sql.NullString
	err := rn.r.DB.QueryRowContext(ctx, `SELECT generation, commit_position, prepare_position, version,
		shadow_generation, shadow_commit, shadow_prepare, coalesce(shadow_version, 1), shadow_mode FROM projection_checkpoints WHERE name = ?`, rn.p.Name()).
		Scan(&gen, &c, &p, &version, &sg, &sc, &sp, &shadowVersion, &mode)
	if errors.Is(err, sql.ErrNoRows) {
		err = rn.tx(ctx, func(tx *sql.Tx) error {
			if err := rn.createGeneration(ctx, tx, gen); err != nil {
				return err
			}
			if err := pointViews(ctx, tx, rn.p, gen); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO projection_checkpoints (name, generation, commit_position, prepare_position, version)
				VALUES (?, ?, 0, 0, ?)`, rn.p.Name(), gen, version)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("projection %s: %w", rn.p.Name(), err)
	}
	rn.mu.Lock()
	rn.generation = gen
	rn.checkpoint = eventstore.Position{Commit: c, Prepare: p}
	rn.outdated = version != rn.p.Version()
	resume := sg.Valid && shadowVersion == rn.p.Version()
	if resume {
		rn.rebuild = &RebuildStatus{Generation: int(sg.Int64), Checkpoint: eventstore.Position{Commit: uint64(sc.Int64), Prepare: uint64(sp.Int64)},
			Started: time.Now(), RebuildOptions: optionsOf(mode)}
		rn.state = StateRebuilding
	}
	rn.mu.Unlock()
	switch {
	case resume:
		return nil
	case sg.Valid:
		rn.r.log().Info("projection rebuild started by another version; starting it again", "projection", rn.p.Name(),
			"version", shadowVersion, "want", rn.p.Version())
	case rn.outdated:
		rn.r.log().Info("projection written by another version; rebuilding it", "projection", rn.p.Name(),
			"version", version, "want", rn.p.Version())
	default:
		return nil
	}
	// The live generation is not this version's: the rebuild replaces it, whatever the one
	// started by another version was asked to do.
	if err := rn.startRebuild(ctx, RebuildOptions{Swap: true}); err != nil {
		return fmt.Errorf("projection %s: %w", rn.p.Name(), err)
	}
	return nil
}

func (rn *run) createGeneration(ctx context.Context, tx *sql.Tx, gen int) error {
	t := tablesOf(rn.p, gen)
	for _, name := range t {
		if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+name); err != nil {
			return err
		}
	}
	return rn.p.Create(ctx, tx, t)
}

// pointViews makes each base name a view of generation gen's table.
func pointViews(ctx context.Context, tx *sql.Tx, p Projection, gen int) error {
	for base, table := range tablesOf(p, gen) {
		if _, err := tx.ExecContext(ctx, `DROP VIEW IF EXISTS `+base); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `CREATE VIEW `+base+` AS SELECT * FROM `+table); err != nil {
			return err
		}
	}
	return nil
}
