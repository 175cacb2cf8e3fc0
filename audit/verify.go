package audit

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
)

// Kinds of finding.
const (
	KindTampered   = "tampered"      // an event's bytes no longer match its own hash
	KindBrokenLink = "broken-link"   // an event does not chain to the event before it
	KindUnchained  = "unchained"     // an event carries no chain hash
	KindMissing    = "missing-event" // a revision of the stream is absent
	KindReordered  = "reordered"     // the log holds a stream's events out of revision order
	KindInvariant  = "invariant"     // the fold breaks an order invariant
	KindDrift      = "drift"         // the read model's row differs from the fold
	KindUnreadable = "unreadable"    // an event this build cannot read: unknown type, newer version, failed upcast
)

// Finding is one problem, located precisely.
type Finding struct {
	Kind     string `json:"kind"`
	Stream   string `json:"stream"`
	Revision uint64 `json:"revision"`
	Expected string `json:"expected,omitempty"`
	Found    string `json:"found,omitempty"`
	Detail   string `json:"detail"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s %s@%d: %s", f.Kind, f.Stream, f.Revision, f.Detail)
	if f.Expected != "" || f.Found != "" {
		s += fmt.Sprintf(" (expected %s, found %s)", f.Expected, f.Found)
	}
	return s
}

// Report is the outcome of a verification.
type Report struct {
	Streams         int       `json:"streams"`         // order streams
	KeyStreams      int       `json:"keyStreams"`      // idempotency key streams, read for the lookups' check
	OrdersCompared  bool      `json:"ordersCompared"`  // the orders read model was there, at this build's version
	LookupsCompared bool      `json:"lookupsCompared"` // and the lookups
	Events          uint64    `json:"events"`
	RowsChecked     int       `json:"rowsChecked"`
	Seconds         float64   `json:"seconds"`
	EventsPerSecond float64   `json:"eventsPerSecond"`
	Findings        []Finding `json:"findings"`
}

// Verifier checks a log. Set Feed; Reads adds the drift check of the orders read model and,
// if the file holds them at this build's version, of the lookups. The read models are read as
// of a snapshot taken before the log, with their checkpoints: what changed after a checkpoint
// is not compared, since the model may only lag, so the check can run beside a live server.
type Verifier struct {
	Feed  eventstore.Feed
	Reads *projections.Queries
	// Progress, if set, is called now and then with the position reached and the head.
	Progress func(at, head eventstore.Position)
}

// stream is what the verifier knows of one order stream while reading the log.
type stream struct {
	last     eventstore.Position // of the stream's last event read
	next     uint64              // the revision expected next
	lastHash string              // stored hash of the event at next-1
	gaps     map[uint64]bool     // revisions skipped so far (missing, unless they arrive late); nil if none
	fold     order.Folder
	paid     int  // payment-confirmed events
	broken   bool // a chain finding was already made: report only the first
	invalid  bool // an invariant finding was already made
}

// Verify reads the whole log and reports every finding. It fails only when the log or the read
// model cannot be read.
func (v *Verifier) Verify(ctx context.Context) (Report, error) {
	start := time.Now()
	head, err := v.Feed.Head(ctx)
	if err != nil {
		return Report{}, err
	}
	// The read models are fixed before the log is read: every row then comes from an event
	// the log holds.
	models, err := v.snapshot(ctx)
	if err != nil {
		return Report{}, err
	}
	defer models.close()
	var rep Report
	streams, err := v.readLog(ctx, head, models.lookups, &rep)
	if err != nil {
		return Report{}, err
	}
	rep.Streams = len(streams)
	for name, st := range streams {
		rep.Findings = append(rep.Findings, st.finish(name)...)
		for rev := range st.gaps {
			rep.Findings = append(rep.Findings, Finding{Kind: KindMissing, Stream: name, Revision: rev,
				Detail: fmt.Sprintf("revision %d is not in the log", rev)})
		}
	}
	if models.orders != nil {
		drift, rows, err := drift(ctx, models.orders, models.ordersAt, streams)
		if err != nil {
			return Report{}, err
		}
		rep.Findings, rep.RowsChecked, rep.OrdersCompared = append(rep.Findings, drift...), rows, true
	}
	if lk := models.lookups; lk != nil {
		rep.KeyStreams, rep.LookupsCompared = len(lk.byStream), true
		drift, rows := lk.drift()
		rep.Findings, rep.RowsChecked = append(rep.Findings, drift...), rep.RowsChecked+rows
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		return a.Revision < b.Revision
	})
	if v.Progress != nil {
		v.Progress(head, head)
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.EventsPerSecond = float64(rep.Events) / rep.Seconds
	}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

// readModels are the read models the log is compared with, as of one snapshot.
type readModels struct {
	snap     *projections.Snapshot // nil without Verifier.Reads
	orders   *projections.Snapshot // snap, if its orders read model is at this build's version
	ordersAt eventstore.Position   // the orders read model's checkpoint
	lookups  *lookups              // nil unless the snapshot holds them at this build's version
}

func (m readModels) close() {
	if m.snap != nil {
		m.snap.Close()
	}
}

// snapshot takes the snapshot of the read models to compare, if the verifier has them.
func (v *Verifier) snapshot(ctx context.Context) (m readModels, err error) {
	if v.Reads == nil {
		return m, nil
	}
	if m.snap, err = v.Reads.Snapshot(ctx); err != nil {
		return readModels{}, fmt.Errorf("read the read models: %w", err)
	}
	defer func() {
		if err != nil {
			m.close()
			m = readModels{}
		}
	}()
	at, version, ok, err := m.snap.Checkpoint(ctx, projections.Orders{}.Name())
	if err != nil {
		return m, fmt.Errorf("read the orders' checkpoint: %w", err)
	}
	if ok && version == (projections.Orders{}).Version() {
		m.orders, m.ordersAt = m.snap, at
	}
	rows, ok, err := m.snap.LookupRows(ctx)
	if err != nil {
		return m, fmt.Errorf("read the lookups: %w", err)
	}
	if ok {
		m.lookups = newLookups(rows)
	}
	return m, nil
}

// readLog reads the order streams of the log up to head, and the key streams if there are
// lookups to compare, and checks each event; it counts the events and adds the findings to
// rep. It returns what it knows of each order stream.
func (v *Verifier) readLog(ctx context.Context, head eventstore.Position, lk *lookups, rep *Report) (map[string]*stream, error) {
	filter := eventstore.Filter{StreamPrefixes: []string{command.StreamName("")}}
	if lk != nil {
		filter.StreamPrefixes = append(filter.StreamPrefixes, idempotency.StreamPrefix)
	}
	pages, readErr, stop := v.pages(ctx, filter)
	defer stop()
	streams := map[string]*stream{}
	for page := range pages {
		for _, e := range page {
			rep.Events++
			if v.Progress != nil && rep.Events%100_000 == 0 {
				v.Progress(e.Position, head)
			}
			if lk != nil && strings.HasPrefix(e.Stream, idempotency.StreamPrefix) {
				lk.noteKey(e)
				continue
			}
			st := streams[e.Stream]
			if st == nil {
				st = &stream{lastHash: command.Genesis}
				streams[e.Stream] = st
			}
			found, ev := st.check(e)
			rep.Findings = append(rep.Findings, found...)
			if lk != nil {
				lk.note(e, ev)
			}
			st.last = e.Position
		}
	}
	select {
	case err := <-readErr:
		return nil, fmt.Errorf("read the log: %w", err)
	default:
		return streams, nil
	}
}

// pages reads the log's events that filter selects on a goroutine of its own, in pages,
// while the caller checks them: the two halves take about as long, and there are two
// processors. The pages end early if the read fails, with the error; stop ends the read.
func (v *Verifier) pages(ctx context.Context, filter eventstore.Filter) (pages <-chan []eventstore.RecordedEvent, readErr <-chan error, stop func()) {
	out := make(chan []eventstore.RecordedEvent, 8)
	errs := make(chan error, 1)
	ctx, stop = context.WithCancel(ctx)
	go func() {
		defer close(out)
		page := make([]eventstore.RecordedEvent, 0, 1024)
		for e, err := range v.Feed.ReadAll(ctx, eventstore.ReadAllOptions{Filter: filter}) {
			if err != nil {
				errs <- err
				return
			}
			if page = append(page, e); len(page) == cap(page) {
				out <- page
				page = make([]eventstore.RecordedEvent, 0, 1024)
			}
		}
		out <- page
	}()
	return out, errs, stop
}

// check verifies one event of the stream and folds it. It returns the event decoded, or nil.
func (st *stream) check(e eventstore.RecordedEvent) (out []Finding, ev order.Event) {
	found := func(kind, detail, expected, got string) {
		out = append(out, Finding{Kind: kind, Stream: e.Stream, Revision: e.Revision, Detail: detail, Expected: expected, Found: got})
	}
	inOrder := st.place(e, found)
	st.chain(e, inOrder, found)
	return out, st.apply(e, found)
}

// found reports a finding at the event being checked.
type foundFunc func(kind, detail, expected, got string)

// place checks the event's revision against those read before it, and reports whether it is
// the one expected next.
func (st *stream) place(e eventstore.RecordedEvent, found foundFunc) (inOrder bool) {
	switch {
	case e.Revision > st.next:
		if st.gaps == nil {
			st.gaps = map[uint64]bool{}
		}
		for r := st.next; r < e.Revision; r++ {
			st.gaps[r] = true
		}
		st.invalid = true // the fold misses events: what it breaks is a consequence
	case e.Revision < st.next:
		st.invalid = true
		if st.gaps[e.Revision] {
			delete(st.gaps, e.Revision)
			found(KindReordered, fmt.Sprintf("revision %d comes after revision %d in the log", e.Revision, st.next-1), "", "")
		} else {
			found(KindReordered, fmt.Sprintf("revision %d appears twice", e.Revision), "", "")
		}
	}
	return e.Revision == st.next
}

// chain checks the event's own bytes, then its link to the previous revision.
func (st *stream) chain(e eventstore.RecordedEvent, inOrder bool, found foundFunc) {
	hash, m, err := command.SplitHash(e.Metadata)
	switch {
	case err != nil:
		if !st.broken {
			found(KindUnchained, "the event's metadata carries no chain hash", "", "")
			st.broken = true
		}
	default:
		prevHash := storedPrevHash(m)
		if want := command.ChainHash(prevHash, e.Stream, e.Revision, e.Type, e.Data, m); want != hash {
			if !st.broken {
				found(KindTampered, "the event's bytes do not match its hash", want, hash)
				st.broken = true
			}
		} else if inOrder && prevHash != st.lastHash && !st.gaps[e.Revision-1] && !st.broken {
			found(KindBrokenLink, fmt.Sprintf("the event does not chain to revision %d", int64(e.Revision)-1), st.lastHash, prevHash)
			st.broken = true
		}
	}
	if e.Revision >= st.next {
		st.next, st.lastHash = e.Revision+1, hash
	}
}

// apply decodes the event, checks that it can follow the fold and folds it. It returns the
// event, or nil if it cannot be read.
func (st *stream) apply(e eventstore.RecordedEvent, found foundFunc) order.Event {
	ev, err := order.Unmarshal(e.Type, e.Data)
	if err != nil {
		if !st.invalid {
			found(KindUnreadable, "the event cannot be read: "+err.Error(), "", "")
			st.invalid = true
		}
		return nil
	}
	// The domain's own state machine, which Decide keeps, so that what the service wrote passes.
	if !st.invalid {
		if err := st.fold.Follows(ev); err != nil {
			found(KindInvariant, "the state machine jumped: "+err.Error(), "", "")
			st.invalid = true
		}
	}
	st.fold.Apply(ev)
	if _, ok := ev.(order.PaymentConfirmed); ok {
		st.paid++
	}
	return ev
}

// finish checks the invariants of the stream's final state; the totals are sums of its
// events, so they hold at the end only if every step kept them.
func (st *stream) finish(name string) []Finding {
	if st.invalid {
		return nil
	}
	s := st.fold.State()
	for _, broken := range invariants(s, st.paid) {
		return []Finding{{Kind: KindInvariant, Stream: name, Revision: uint64(max(s.Version-1, 0)), Detail: broken}}
	}
	return nil
}

// storedPrevHash finds the prevHash member in chained metadata without decoding it: the raw
// bytes "prevHash":" can only be a member name, since quotes inside strings are escaped.
func storedPrevHash(m []byte) string {
	const name = `"prevHash":"`
	i := bytes.Index(m, []byte(name))
	if i < 0 || len(m) < i+len(name)+64 {
		return ""
	}
	return string(m[i+len(name) : i+len(name)+64])
}

// invariants returns what s breaks.
func invariants(s order.State, confirmed int) []string {
	var out []string
	sum, err := linesTotal(s)
	switch {
	case err != nil:
		out = append(out, "the lines' total cannot be represented: "+err.Error())
	case sum != s.Total.Amount:
		out = append(out, fmt.Sprintf("total %d is not the sum of the lines, %d", s.Total.Amount, sum))
	}
	if confirmed > 1 {
		out = append(out, fmt.Sprintf("%d confirmed payments", confirmed))
	}
	if s.Refunded.Amount+s.PendingRefund.Amount > s.Paid.Amount {
		out = append(out, fmt.Sprintf("refunded %d (+%d pending) exceeds paid %d", s.Refunded.Amount, s.PendingRefund.Amount, s.Paid.Amount))
	}
	return out
}

// linesTotal is the sum of quantity × unit price over the lines of s, or why it overflows.
func linesTotal(s order.State) (int64, error) {
	total := order.Money{Currency: s.Currency}
	for _, l := range s.Lines {
		sub, err := l.UnitPrice.Mul(l.Quantity)
		if err == nil {
			total, err = total.Add(sub)
		}
		if err != nil {
			return 0, fmt.Errorf("line %s: %w", l.SKU, err)
		}
	}
	return total.Amount, nil
}

// drift compares every row of the orders read model in snap with its fold, but for orders with
// events after at, the model's checkpoint.
func drift(ctx context.Context, snap *projections.Snapshot, at eventstore.Position, streams map[string]*stream) ([]Finding, int, error) {
	var out []Finding
	prefix := command.StreamName("")
	seen := map[string]bool{}
	rows := 0
	for cursor := ""; ; {
		page, next, err := snap.ListOrders(ctx, projections.OrderFilter{After: cursor, Limit: 500})
		if err != nil {
			return nil, 0, fmt.Errorf("read the orders read model: %w", err)
		}
		for _, row := range page {
			rows++
			name := prefix + row.State.ID
			seen[name] = true
			st := streams[name]
			if st == nil {
				out = append(out, Finding{Kind: KindDrift, Stream: name, Detail: "a read-model row without events"})
				continue
			}
			if st.last.Compare(at) > 0 {
				continue // changed after the model's checkpoint: it may only lag
			}
			fold := st.fold.State()
			if diff := fieldDiff(fold, row.State); diff != "" {
				out = append(out, Finding{Kind: KindDrift, Stream: name, Revision: uint64(max(fold.Version-1, 0)),
					Detail: "the read-model row differs from the fold: " + diff})
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for name, st := range streams {
		lagging := st.last.Compare(at) > 0
		if !seen[name] && !lagging && st.fold.State().Version > 0 {
			out = append(out, Finding{Kind: KindDrift, Stream: name, Revision: uint64(st.fold.State().Version - 1), Detail: "no read-model row for the order"})
		}
	}
	return out, rows, nil
}
