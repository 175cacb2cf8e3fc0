package main

import (
	"bytes"
	"context"
	"fmt"
	"iter"

	"github.com/acme/orders/eventstore"
)

// resume reads the destination's log beside the source's, checks that each of its events is the
// source's event at the same place (its own events aside), truncates the placeholders of a late
// stream whose first events it holds, and returns the source's position of the last event the
// destination holds (Start if it holds none).
func (c *copier) resume(ctx context.Context) (eventstore.Position, error) {
	c.stats.phase, c.stats.at = "checking", eventstore.Start
	next, stop := iter.Pull2(c.src.ReadAll(ctx, eventstore.ReadAllOptions{}))
	defer stop()
	for d, err := range c.dst.ReadAll(ctx, eventstore.ReadAllOptions{}) {
		if err != nil {
			return eventstore.Start, fmt.Errorf("read the destination's log: %w", err)
		}
		if c.noteOwn(d) {
			continue
		}
		s, ok, err := nextCopied(next)
		if err != nil {
			return eventstore.Start, fmt.Errorf("read the source's log: %w", err)
		}
		why := "the source has no more events"
		if ok {
			why = differs(s, d, c.positions)
		}
		if why != "" {
			return eventstore.Start, fmt.Errorf("the destination is not a copy of the source's first events: its event %d (%s@%d, id %s) %s; "+
				"copy into a new store (if an interrupted copy left it, the source has changed since: start again)", c.stats.held+1, d.Stream, d.Revision, d.ID, why)
		}
		if err := c.settle(ctx, d.Stream, d.Revision); err != nil {
			return eventstore.Start, err
		}
		c.stats.held++
		if c.stats.at = s.Position; c.stats.held%uint64(c.batch) == 0 && c.onBatch != nil {
			c.onBatch(c.stats)
		}
	}
	return c.stats.at, nil
}

// noteOwn reports whether d, an event of the destination, is one the copy wrote of its own, and
// notes what it says: a late stream's last placeholder so far, or a filler stream's last
// filler, which a killed copy left undeleted.
func (c *copier) noteOwn(d eventstore.RecordedEvent) bool {
	switch d.Type {
	case placeholderType:
		c.placeheld[d.Stream] = d.Revision
	case fillerType:
		c.fillerRevs[d.Stream] = d.Revision
	default:
		return false
	}
	return true
}

// nextCopied returns the next event of a pulled log that a copy copies: not its own.
func nextCopied(next func() (eventstore.RecordedEvent, error, bool)) (eventstore.RecordedEvent, bool, error) {
	for {
		e, err, ok := next()
		if !ok || err != nil {
			return e, ok, err
		}
		if !ownEvent(e) {
			return e, true, nil
		}
	}
}

// differs says how d, an event of the destination, differs from s, the source's event at its
// place in the log, or "" if it is its copy; with positions, at the same position.
func differs(s, d eventstore.RecordedEvent, positions bool) string {
	switch {
	case s.ID != d.ID || s.Stream != d.Stream || s.Revision != d.Revision:
		return fmt.Sprintf("is not the source's event there (%s@%d, id %s)", s.Stream, s.Revision, s.ID)
	case s.Type != d.Type:
		return fmt.Sprintf("has type %s, the source's %s", d.Type, s.Type)
	case !bytes.Equal(s.Data, d.Data):
		return "differs from the source's in its data"
	case !bytes.Equal(s.Metadata, d.Metadata):
		return "differs from the source's in its metadata"
	case positions && s.Position.Commit != d.Position.Commit:
		return fmt.Sprintf("is at position %d, the source's at %d", d.Position.Commit, s.Position.Commit)
	}
	return ""
}

// positionAfter reads the destination's next position.
func (c *copier) positionAfter(ctx context.Context) error {
	head, err := c.dst.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the destination's head: %w", err)
	}
	c.next = head.Commit + 1
	return nil
}
