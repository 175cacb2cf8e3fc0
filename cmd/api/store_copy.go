package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/schollz/progressbar/v3"
)

// storeCmd holds the commands that work on a whole event store.
type storeCmd struct {
	Copy storeCopyCmd `cmd:"" help:"Copy every event of one event store into another, in log order, going on after an interrupted copy: the embedded store of a data directory, PostgreSQL or KurrentDB."`
}

// storeCopyCmd copies a whole event log from one backend to another, so that a deployment on
// the embedded store can move to PostgreSQL, and back (see copier).
type storeCopyCmd struct {
	From  string `required:"" env:"API_COPY_FROM" placeholder:"DIR|URL" help:"The store to copy: a data directory holding the embedded store, a postgres:// (postgresql://) URL, or a KurrentDB esdb:// (kurrentdb://) connection string. Stop the services on it first (a data directory is locked for the copy, as api serve locks it): an event appended during the copy may be left out, and a stream truncated or deleted meanwhile may stop it."`
	To    string `required:"" env:"API_COPY_TO" placeholder:"DIR|URL" help:"The store to copy into, given as --from: empty, or holding what an interrupted copy from --from wrote, which the copy checks and goes on after. A data directory is created if missing. Put a password in the environment variable, PGPASSWORD or a PGPASSFILE rather than in the flag: the machine's other users see the process list."`
	Batch int    `default:"512" help:"Events read ahead and appended at once, 1 to 10000 (a batch also ends at 16 MiB of data): the most the copy holds in memory."`
	// MaxLate bounds the list of the streams that begin past revision 0 (see copier).
	MaxLate int `name:"max-late-streams" default:"1000000" help:"The most streams that begin past revision 0 in the source's log (truncated, or deleted and written again: webhook deliveries, keys used again after they expired) the copy lists, about 100 bytes each; a source with more is refused before anything is copied."`
}

// Bounds of a copy's batch: its events, and the bytes of their data and metadata.
const (
	maxCopyBatch      = 10_000
	maxCopyBatchBytes = 16 << 20
)

// Validate bounds --batch and --max-late-streams.
func (c *storeCopyCmd) Validate() error {
	if c.Batch < 1 || c.Batch > maxCopyBatch {
		return fmt.Errorf("--batch %d: give 1 to %d events", c.Batch, maxCopyBatch)
	}
	if c.MaxLate < 1 {
		return fmt.Errorf("--max-late-streams %d: give at least 1", c.MaxLate)
	}
	return nil
}

func (c *storeCopyCmd) Run(ctx context.Context, e *env) (err error) {
	from, err := parseLocation("--from", c.From)
	if err != nil {
		return err
	}
	to, err := parseLocation("--to", c.To)
	if err != nil {
		return err
	}
	if from.same(to) {
		return errors.New("--from and --to name the same store")
	}
	// The stores redact their own errors; this catches any other that quotes a URL.
	defer func() { err = redactError(err, append(from.secrets(), to.secrets()...)) }()
	src, closeSrc, err := from.open(ctx, false)
	if err != nil {
		return fmt.Errorf("open --from %s: %w", from, err)
	}
	defer closeSrc()
	dst, closeDst, err := to.open(ctx, true)
	if err != nil {
		return fmt.Errorf("open --to %s: %w", to, err)
	}
	defer closeDst()
	head, err := src.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the head of %s: %w", from, err)
	}
	fmt.Fprintf(e.stdout, "copying %s to %s\n", from, to)
	progress := newCopyProgress(e.stdout, head)
	// KurrentDB's positions are places in its files: another store cannot follow them.
	cp := newCopier(src, dst, c.Batch, from.backend != "kurrentdb" && to.backend != "kurrentdb")
	cp.maxLate = c.MaxLate
	cp.onBatch = progress.show
	start := time.Now()
	st, err := cp.run(ctx)
	progress.finish()
	if err != nil {
		return err
	}
	return printCopySummary(e.stdout, st, cp.positions, time.Since(start))
}

// printCopySummary prints the figures of a copy that ended.
func printCopySummary(w io.Writer, st copyStats, positions bool, took time.Duration) error {
	if st.held > 0 {
		fmt.Fprintf(w, "the destination held the source's first %d events already (checked one by one)\n", st.held)
	}
	if st.late > 0 {
		fmt.Fprintf(w, "%d streams began past revision 0 (truncated or deleted in the source): %d placeholder events brought them to their first revision and were truncated\n",
			st.late, st.placeholders)
	}
	switch {
	case positions && st.fillers > 0:
		fmt.Fprintf(w, "every event kept its position; %d fillers took those of the source's other removed events and were deleted\n", st.fillers)
	case positions:
		fmt.Fprintln(w, "every event kept its position")
	default:
		fmt.Fprintln(w, "positions differ from the source's (KurrentDB): serve the copy with new read models (a new --data), and check the webhook endpoints' deliveries")
	}
	_, err := fmt.Fprintf(w, "copied %d events, %d new streams, in %.1fs: %.0f events/s\n",
		st.events, st.streams, took.Seconds(), float64(st.events)/max(took.Seconds(), 1e-9))
	return err
}

// location is one side of a copy: the embedded store's data directory, or a server's URL.
type location struct {
	raw     string
	backend string // as storeFlags.Store: "sqlite", "postgres" or "kurrentdb"
}

// urlSchemes maps the schemes a location may name to their backends.
var urlSchemes = map[string]string{
	"postgres": "postgres", "postgresql": "postgres",
	"esdb": "kurrentdb", "esdb+discover": "kurrentdb", "kurrentdb": "kurrentdb", "kurrentdb+discover": "kurrentdb",
}

// parseLocation reads the value of flag: a URL if it has a scheme, else a data directory.
func parseLocation(flag, s string) (location, error) {
	scheme, _, isURL := strings.Cut(s, "://")
	if !isURL || strings.ContainsAny(scheme, `/\`) {
		// A PostgreSQL key=value connection string would be taken for a directory, and its
		// password printed as the directory's name.
		for _, key := range []string{"host=", "dbname=", "password=", "user="} {
			if strings.Contains(s, key) {
				return location{}, fmt.Errorf("%s: give PostgreSQL as a postgres:// URL, not as key=value words", flag)
			}
		}
		return location{raw: s, backend: "sqlite"}, nil
	}
	b, ok := urlSchemes[strings.ToLower(scheme)]
	if !ok {
		return location{}, fmt.Errorf("%s: unknown scheme %q: give a data directory, a postgres:// URL or an esdb:// connection string", flag, scheme)
	}
	return location{raw: s, backend: b}, nil
}

// String is the location as the copy prints it: without its password.
func (l location) String() string { return postgres.Redact(l.raw, l.secrets()...) }

// same reports whether l and o name one store, as far as their text tells.
func (l location) same(o location) bool {
	if l.backend != "sqlite" || o.backend != "sqlite" {
		return l.raw == o.raw
	}
	a, errA := filepath.Abs(l.raw)
	b, errB := filepath.Abs(o.raw)
	return errA == nil && errB == nil && a == b
}

// open opens the store at l; closing it closes the store. The embedded store of a source
// must exist; a destination's data directory is created if missing. Either is locked as api
// serve locks it: no service writes into it during the copy (the copy reads the source's log
// three times, and writes the destination's).
func (l location) open(ctx context.Context, destination bool) (s backend, closing func(), err error) {
	release := func() {}
	if l.backend == "sqlite" && !destination && !exists(filepath.Join(l.raw, sqlite.FileName)) {
		return nil, nil, fmt.Errorf("no event store in %s", l.raw)
	}
	if l.backend == "sqlite" {
		if release, err = lockData(l.raw); err != nil {
			return nil, nil, err
		}
	}
	f := storeFlags{Store: l.backend, PostgresURL: l.raw, KurrentDBURL: l.raw}
	if s, err = f.open(ctx, l.raw, slog.New(slog.DiscardHandler)); err != nil {
		release()
		return nil, nil, err
	}
	return s, func() { s.Close(); release() }, nil
}

// secrets returns the passwords in l's URL, as written and decoded: its user's, and any
// password parameter.
func (l location) secrets() []string {
	if l.backend == "sqlite" {
		return nil
	}
	var out []string
	authority := l.raw[strings.Index(l.raw, "://")+3:]
	query := ""
	if i := strings.IndexAny(authority, "/?"); i >= 0 {
		authority, query = authority[:i], authority[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, p, ok := strings.Cut(authority[:at], ":"); ok {
			out = append(out, p)
		}
	}
	if _, q, ok := strings.Cut(query, "?"); ok {
		for kv := range strings.SplitSeq(q, "&") {
			if k, v, _ := strings.Cut(kv, "="); strings.EqualFold(k, "password") {
				out = append(out, v)
			}
		}
	}
	for _, s := range out {
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	return out
}

// redactedError is an error whose message has its secrets masked; it still wraps the error.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactError returns err with secrets masked in its message.
func redactError(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	if msg := postgres.Redact(err.Error(), secrets...); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// copyProgress shows a copy's progress on w: on a terminal a bar over the source's positions
// up to its head, else a line every progressEvery.
type copyProgress struct {
	w    io.Writer
	head eventstore.Position
	bar  *progressbar.ProgressBar
	last time.Time // of the last line
}

// progressEvery spaces the progress lines written to something other than a terminal.
const progressEvery = 5 * time.Second

func newCopyProgress(w io.Writer, head eventstore.Position) *copyProgress {
	return &copyProgress{w: w, head: head, last: time.Now(), bar: terminalBar(w, "copying", head.Commit)}
}

// show reports the copy's figures after a batch.
func (p *copyProgress) show(st copyStats) {
	if p.bar != nil {
		if at := int64(st.at.Commit); at > p.bar.GetMax64() {
			p.bar.ChangeMax64(at) // the source grew during the copy
		}
		p.bar.Describe(fmt.Sprintf("%s: %d events checked, %d copied", st.phase, st.held, st.events))
		p.bar.Set64(int64(st.at.Commit))
		return
	}
	if time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "%s: %d events checked in the destination, %d copied; at position %d of the source's %d\n",
		st.phase, st.held, st.events, st.at.Commit, p.head.Commit)
}

// finish ends the bar's line.
func (p *copyProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
