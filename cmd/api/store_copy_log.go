package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// copier copies the log of a source store into a destination store, in log order, each event
// with its id, stream, revision, type, data and metadata as they are (the hash chains of the
// order streams live in the metadata, so they hold in the copy). Every append names the exact
// revision it expects (NoStream before revision 0), so another writer on the destination
// stops the copy instead of mixing with it. The store records each event at its own time.
//
// Resuming: the copy first reads the destination's log beside the source's and checks that it
// is a copy of the source's first events, event by event (resume); then it copies the rest.
// So a copy that was killed, at any point, goes on where it stopped when run again, and one
// that had finished says so; a destination that holds anything else is refused.
//
// Truncated and deleted streams: the embedded store and PostgreSQL remove the events of a
// truncated or deleted stream from the log. The log holds nothing of a stream deleted for good:
// the copy has none of it (a stream of that name written after the copy starts again at
// revision 0). A stream truncated, or deleted and written again, begins at a revision r > 0:
// a late stream. The contract has no way to create a stream at r, so the copier appends r
// placeholder events to it first (revisions 0 to r-1), then its events with Exact(r-1), and
// then truncates it before r: it reads from r, with the source's revisions and event ids, and
// its later appends take the same expected revisions. Nothing of the placeholders stays in the
// log of the embedded store or of PostgreSQL (KurrentDB keeps truncated events in $all until
// a scavenge). Order streams are never truncated or deleted: they copy exactly.
//
// Positions: webhook checkpoints, read-model checkpoints and the Log-Position answers hold
// positions of the log, so where both stores number their log 1, 2, 3… (the embedded store and
// PostgreSQL; not KurrentDB) the copy keeps every event's position, and ends at the source's
// head. The positions of the source's removed events are filled in the destination: with the
// placeholders of the late streams, else with fillers, appended to streams of their own and
// deleted when the copy ends. A late stream's removed events all came before its first remaining
// one, so there are enough such positions before it for its placeholders, and placing them
// earliest first remaining event first (plan lists the late streams) always finds room. What
// fills the positions before a run joins the run's append (see gapPlan), so that a log with a
// removed event between every two (a key expired before each keyed command) takes no more
// appends than one without. Every append's result is checked against the source's positions.
type copier struct {
	src   backend
	dst   backend
	batch int
	// positions: the copy keeps the source's positions (see above).
	positions bool
	// onBatch, if set, is told the figures after each batch read, checked or copied.
	onBatch func(copyStats)

	late     []lateStream // the late streams, in log order (positions only), at most maxLate
	maxLate  int
	nextLate int    // late[:nextLate] need no more placeholders
	next     uint64 // the destination's next position (positions only)
	// placeheld holds the late streams of the destination whose placeholders are not
	// truncated yet, with the revision of their last placeholder.
	placeheld map[string]uint64
	// fillerRevs holds the filler streams the destination holds, this copy's or a killed one's,
	// with their last revision: they are deleted when the copy ends.
	fillerRevs map[string]uint64
	stats      copyStats
}

// copyStats are the figures of a copy.
type copyStats struct {
	phase        string              // "reading" the source, "checking" the destination, "copying"
	held         uint64              // events the destination held already, checked
	events       uint64              // events this run copied
	streams      uint64              // streams this run began in the destination
	late         uint64              // of them, those begun past revision 0 (see copier)
	placeholders uint64              // events appended to bring them there, then truncated
	fillers      uint64              // events appended to fill removed events' positions, then deleted
	at           eventstore.Position // in the source, of the last event read, checked or copied
}

// lateStream is a stream whose first event in the source's log has a revision first > 0.
type lateStream struct {
	stream string
	first  uint64 // the revision of its first event in the log
	at     uint64 // the position of that event
}

func newCopier(src, dst backend, batch int, positions bool) *copier {
	return &copier{src: src, dst: dst, batch: batch, positions: positions, maxLate: 1_000_000,
		placeheld: map[string]uint64{}, fillerRevs: map[string]uint64{}}
}

// run copies what the destination lacks of the source's log.
func (c *copier) run(ctx context.Context) (copyStats, error) {
	if c.positions {
		if err := c.plan(ctx); err != nil {
			return c.stats, err
		}
	}
	after, err := c.resume(ctx)
	if err != nil {
		return c.stats, err
	}
	if c.positions {
		if err := c.positionAfter(ctx); err != nil {
			return c.stats, err
		}
	}
	if err := c.copyAfter(ctx, after); err != nil {
		return c.stats, err
	}
	if c.positions {
		if err := c.fillToHead(ctx); err != nil {
			return c.stats, err
		}
	}
	if err := c.deleteFillers(ctx); err != nil {
		return c.stats, err
	}
	for stream := range c.placeheld {
		return c.stats, fmt.Errorf("the destination's stream %q holds placeholders of an interrupted copy, but the source no longer holds its events: it is not a copy of the source", stream)
	}
	return c.stats, nil
}

// The types of the events a copy writes besides the source's (see copier); it never copies one.
const (
	placeholderType = "store-copy.placeholder.v1"
	fillerType      = "store-copy.filler.v1"
	// fillerStream is the first stream of the fillers (see fillerAppend).
	fillerStream = "store-copy-fillers"
)

// copyIDSpace is the UUIDv5 namespace of the ids of placeholders and fillers, derived from their
// stream and revision, or their position.
var copyIDSpace = uuid.MustParse("93cf9af2-9534-4654-8c78-befc755a8f82")

// ownEvent reports whether e is a placeholder or a filler.
func ownEvent(e eventstore.RecordedEvent) bool {
	return e.Type == placeholderType || e.Type == fillerType
}

// planStreams bounds the streams that plan remembers as seen; it asks the source about others.
const planStreams = 100_000

// plan lists the late streams of the source's log, in log order. A stream whose event is not
// its first in the log is usually one plan saw lately; for any other it reads the stream's
// first event from the source.
func (c *copier) plan(ctx context.Context) error {
	c.stats.phase = "reading"
	seen, err := simplelru.NewLRU[string, struct{}](planStreams, nil)
	if err != nil {
		return err
	}
	n := 0
	for e, err := range c.src.ReadAll(ctx, eventstore.ReadAllOptions{}) {
		if err != nil {
			return fmt.Errorf("read the source's log: %w", err)
		}
		if ownEvent(e) {
			continue
		}
		if e.Revision > 0 && !seen.Contains(e.Stream) {
			first, err := c.firstRevision(ctx, e.Stream)
			if err != nil {
				return err
			}
			if first == e.Revision && len(c.late) == c.maxLate {
				return fmt.Errorf("the source's log holds more than %d streams that begin past revision 0: copy with a larger --max-late-streams", c.maxLate)
			}
			if first == e.Revision {
				c.late = append(c.late, lateStream{stream: e.Stream, first: e.Revision, at: e.Position.Commit})
			}
		}
		seen.Add(e.Stream, struct{}{})
		c.stats.at = e.Position
		if n++; n%c.batch == 0 && c.onBatch != nil {
			c.onBatch(c.stats)
		}
	}
	return nil
}

// firstRevision returns the revision of the first event of stream in the source; a stream
// deleted since its events were read has none to copy, and answers the end of revisions.
func (c *copier) firstRevision(ctx context.Context, stream string) (uint64, error) {
	e, found, err := eventstore.First(ctx, c.src, stream)
	if err != nil || !found {
		return eventstore.End, err
	}
	return e.Revision, nil
}

// fillToHead fills the positions of the source's removed events after its last one, up to its
// head: the next event appended to the copy takes the position that the source's next would,
// after every position that anything (a webhook cursor, a read's Log-Position) may name.
func (c *copier) fillToHead(ctx context.Context) error {
	head, err := c.src.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the source's head: %w", err)
	}
	return c.fillGap(ctx, head.Commit+1)
}

// copyAfter copies the source's events after position after, in batches of up to c.batch
// events and maxCopyBatchBytes of data.
func (c *copier) copyAfter(ctx context.Context, after eventstore.Position) error {
	c.stats.phase = "copying"
	batch := make([]eventstore.RecordedEvent, 0, c.batch)
	size := 0
	for e, err := range c.src.ReadAll(ctx, eventstore.ReadAllOptions{From: after}) {
		if err != nil {
			return fmt.Errorf("read the source's log: %w", err)
		}
		if e.Position.Compare(after) <= 0 || ownEvent(e) {
			continue // From is inclusive; the copy's own events hold nothing
		}
		batch = append(batch, e)
		if size += len(e.Data) + len(e.Metadata); len(batch) < c.batch && size < maxCopyBatchBytes {
			continue
		}
		if err := c.flush(ctx, batch); err != nil {
			return err
		}
		batch, size = batch[:0], 0
	}
	return c.flush(ctx, batch)
}

// flush appends a batch of the source's events, in log order: each run of consecutive events of
// one stream in one append, and runs of distinct streams together in one multi-stream append
// where the destination has it, each after what fills the positions of the source's removed
// events before it, if the copy keeps positions.
func (c *copier) flush(ctx context.Context, batch []eventstore.RecordedEvent) error {
	if len(batch) == 0 {
		return nil
	}
	multi, _ := c.dst.(eventstore.MultiStreamAppender)
	for runs := c.splitRuns(batch); len(runs) > 0; {
		n := 1
		var err error
		if multi == nil {
			err = c.appendAlone(ctx, runs[0])
		} else {
			n, err = c.appendTogether(ctx, multi, runs)
		}
		if err != nil {
			return err
		}
		runs = runs[n:]
	}
	c.stats.events += uint64(len(batch))
	c.stats.at = batch[len(batch)-1].Position
	clear(batch) // let the copied bytes go before the next batch is read
	if c.onBatch != nil {
		c.onBatch(c.stats)
	}
	return nil
}

// splitRuns cuts events into runs of consecutive events of one stream, at consecutive positions
// if the copy keeps them.
func (c *copier) splitRuns(events []eventstore.RecordedEvent) [][]eventstore.RecordedEvent {
	var runs [][]eventstore.RecordedEvent
	start := 0
	for i := 1; i <= len(events); i++ {
		if i == len(events) || events[i].Stream != events[start].Stream || (c.positions && !adjacent(events[i-1], events[i])) {
			runs = append(runs, events[start:i])
			start = i
		}
	}
	return runs
}

// adjacent reports whether b is at the position after a's.
func adjacent(a, b eventstore.RecordedEvent) bool { return b.Position.Commit == a.Position.Commit+1 }

// appendAlone appends a run by itself, after the positions before it are filled.
func (c *copier) appendAlone(ctx context.Context, run []eventstore.RecordedEvent) error {
	if c.positions {
		if err := c.fillGap(ctx, run[0].Position.Commit); err != nil {
			return err
		}
	}
	return c.appendRun(ctx, run)
}

// appendTogether appends runs from the first in one multi-stream append, with what fills the
// positions before each (see group), and returns how many it took. Where a run is a late stream
// without its placeholders, it appends them one by one (see appendRun).
func (c *copier) appendTogether(ctx context.Context, multi eventstore.MultiStreamAppender, runs [][]eventstore.RecordedEvent) (int, error) {
	g := c.group(runs)
	if g.runs == 0 {
		// The positions before the first run cannot join it: filled first, they leave none.
		if err := c.fillGap(ctx, runs[0][0].Position.Commit); err != nil {
			return 0, err
		}
		g = c.group(runs)
	}
	if len(g.appends) == 1 {
		return 1, c.appendRun(ctx, runs[0])
	}
	results, err := multi.MultiStreamAppend(ctx, g.appends...)
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		for _, run := range runs[:g.runs] { // nothing was written
			if err := c.appendAlone(ctx, run); err != nil {
				return 0, err
			}
		}
		return g.runs, nil
	}
	if err != nil {
		return 0, fmt.Errorf("append to %d streams from %s@%d: %w", len(g.appends), runs[0][0].Stream, runs[0][0].Revision, err)
	}
	c.nextLate = g.nextLate
	return g.runs, c.noteGroup(ctx, runs, g.appends, results)
}

// noteGroup checks the results of a group's multi-stream append, in its order, and notes what
// it wrote: placeholders, fillers and runs.
func (c *copier) noteGroup(ctx context.Context, runs [][]eventstore.RecordedEvent, appends []eventstore.StreamAppend, results []eventstore.AppendResult) error {
	next := 0
	for i, a := range appends {
		var err error
		switch a.Events[0].Type {
		case placeholderType:
			err = c.notePlaceholders(a, results[i])
		case fillerType:
			err = c.noteFillers(a, results[i])
		default:
			err = c.appended(ctx, runs[next], results[i])
			next++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// appendRun appends a run of one stream's events at their revisions. A late stream that the
// destination lacks, or holds only placeholders of, gets the rest of them first: always
// without positions (the copier then finds late streams so), and with them only if the source
// has changed since plan (then the positions no longer match, and appended says so).
func (c *copier) appendRun(ctx context.Context, run []eventstore.RecordedEvent) error {
	first := run[0]
	events := eventData(run)
	res, err := c.dst.Append(ctx, first.Stream, expectedBefore(first.Revision), events...)
	if wrong, ok := errors.AsType[*eventstore.WrongExpectedRevisionError](err); ok && first.Revision > 0 {
		var placed uint64
		if placed, err = c.placed(first.Stream, first.Revision, wrong.Actual); err == nil {
			err = c.fill(ctx, first.Stream, placed, first.Revision-placed)
		}
		if err == nil {
			res, err = c.dst.Append(ctx, first.Stream, eventstore.Exact(first.Revision-1), events...)
		}
	}
	if err != nil {
		return fmt.Errorf("append %s@%d..%d: %w", first.Stream, first.Revision, run[len(run)-1].Revision, err)
	}
	return c.appended(ctx, run, res)
}

// placed returns how many placeholders the destination holds of a late stream whose first
// event has revision first, from its actual revision: none (NoStream), or the last placeholder
// the copy wrote.
func (c *copier) placed(stream string, first uint64, actual eventstore.ExpectedRevision) (uint64, error) {
	rev, ok := actual.Revision()
	if !ok {
		return 0, nil
	}
	if held, ok := c.placeheld[stream]; !ok || held != rev || rev >= first {
		return 0, fmt.Errorf("the destination's stream %s is at revision %d, where the copy expected %d: another writer? (%w)",
			stream, rev, first-1, eventstore.ErrWrongExpectedRevision)
	}
	return rev + 1, nil
}

// appended checks an append's result, and truncates the placeholders before it.
func (c *copier) appended(ctx context.Context, run []eventstore.RecordedEvent, res eventstore.AppendResult) error {
	first, last := run[0], run[len(run)-1]
	if res.Revision != last.Revision {
		return fmt.Errorf("append %s@%d..%d: the destination answered revision %d", first.Stream, first.Revision, last.Revision, res.Revision)
	}
	if err := c.advance(res.Position, uint64(len(run))); err != nil {
		return fmt.Errorf("append %s@%d..%d: %w", first.Stream, first.Revision, last.Revision, err)
	}
	if first.Revision == 0 {
		c.stats.streams++
	}
	return c.settle(ctx, first.Stream, first.Revision)
}

// advance checks that an append of n events ended at the position the copy gave them (if it
// keeps positions), and moves the destination's next position after it.
func (c *copier) advance(last eventstore.Position, n uint64) error {
	if !c.positions {
		return nil
	}
	if want := c.next + n - 1; last.Commit != want {
		return fmt.Errorf("the destination put the last event at position %d, the source's %d: has the source changed during the copy?", last.Commit, want)
	}
	c.next = last.Commit + 1
	return nil
}

// settle truncates the placeholders of stream before revision first, its first event copied,
// if the destination holds any.
func (c *copier) settle(ctx context.Context, stream string, first uint64) error {
	if _, ok := c.placeheld[stream]; !ok {
		return nil
	}
	if err := c.dst.Truncate(ctx, stream, first); err != nil {
		return fmt.Errorf("truncate the placeholders of %s before %d: %w", stream, first, err)
	}
	delete(c.placeheld, stream)
	return nil
}

// expectedBefore is the expected revision of an append whose first event has revision rev.
func expectedBefore(rev uint64) eventstore.ExpectedRevision {
	if rev == 0 {
		return eventstore.NoStream
	}
	return eventstore.Exact(rev - 1)
}

// eventData returns the events of run to append, as they are.
func eventData(run []eventstore.RecordedEvent) []eventstore.EventData {
	events := make([]eventstore.EventData, len(run))
	for i, e := range run {
		events[i] = eventstore.EventData{ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata}
	}
	return events
}
