package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/alecthomas/kong"
)

// projectionsExportCmd builds a read model as it stood at a point of the log into a file of
// its own. Like the audit commands it reads the event store directly, the data directory of
// a running service or of a stopped one, and it writes only its own file.
type projectionsExportCmd struct {
	auditStore
	Name string `arg:"" help:"The projection to export (${projections})."`
	AsOf asOf   `name:"as-of" required:"" placeholder:"TIME|POSITION" help:"The point of the log: an RFC 3339 time (the events recorded up to it) or a log position (the events up to it, as in a Log-Position header)."`
	Out  string `required:"" placeholder:"FILE" help:"The SQLite file to create; it must not exist."`
}

// asOf is --as-of: a position if it is a number, else a time.
type asOf struct{ projections.AsOf }

func (a *asOf) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("point", &s); err != nil {
		return err
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n > 0 {
		a.Position = eventstore.Position{Commit: n, Prepare: n}
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want a log position (1 or more) or an RFC 3339 time such as 2026-11-29T12:00:00Z, not %q", s)
	}
	a.Time = t
	return nil
}

func (c *projectionsExportCmd) Run(ctx context.Context, e *env) error {
	var p projections.Projection
	for _, rm := range readModels(slog.New(slog.DiscardHandler)) {
		if rm.Name() == c.Name {
			p = rm
		}
	}
	if p == nil {
		return fmt.Errorf("no projection named %q: there are %s", c.Name, projectionNames())
	}
	if exists(c.Out) {
		return fmt.Errorf("%s exists: an export writes a new file", c.Out)
	}
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	res, err := exportTo(ctx, s, p, c.AsOf.AsOf, c.Out)
	if err != nil {
		return err
	}
	took := time.Since(start)
	upTo := "no event"
	if res.Events > 0 {
		upTo = fmt.Sprintf("up to position %d, recorded %s", res.Last.Commit, res.LastRecorded.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(e.stdout, "%s: %d events applied, %s, in %s (%.0f events/s) into %s\n", c.Name, res.Events, upTo,
		took.Round(time.Millisecond), float64(res.Events)/took.Seconds(), c.Out)
	return nil
}

// exportTo exports p into a new file at out: built beside it under a temporary name and
// renamed when complete, so that out is either a whole export or absent.
func exportTo(ctx context.Context, feed eventstore.Feed, p projections.Projection, at projections.AsOf, out string) (projections.Exported, error) {
	partial := out + ".partial"
	removePartial := func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(partial + suffix)
		}
	}
	removePartial() // what an interrupted export left
	db, err := sqlite.OpenDB(partial)
	if err != nil {
		return projections.Exported{}, err
	}
	res, err := projections.Export(ctx, feed, p, db, at)
	if err == nil {
		_, err = db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	err = errors.Join(err, db.Close())
	if err == nil {
		err = syncFile(partial)
	}
	if err == nil {
		err = os.Rename(partial, out)
	}
	if err != nil {
		removePartial()
		return projections.Exported{}, err
	}
	return res, syncFile(filepath.Dir(out))
}

// syncFile flushes a file, or a directory's entries, to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
