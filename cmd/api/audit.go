package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/acme/orders/api"
	"github.com/acme/orders/audit"
	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/alecthomas/kong"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// auditCmd reads the event store directly: it works on the data directory of a running
// service (SQLite's WAL lets readers in) or of a stopped one.
type auditCmd struct {
	History auditHistoryCmd `cmd:"" help:"Print an order's events with who did what and when."`
	State   auditStateCmd   `cmd:"" help:"Show an order as it was at a revision (--revision N) or a time (--at TIME)."`
	Export  auditExportCmd  `cmd:"" help:"Write every event of every stream as JSON lines, in log order."`
	Verify  auditVerifyCmd  `cmd:"" help:"Check hash chains, order invariants and read-model drift; exit 1 on any finding."`
}

// auditStore is the store the audit commands read: the data directory's, or KurrentDB.
type auditStore struct {
	Data string `default:"./data" env:"API_DATA" help:"Data directory: the embedded event store and the read models."`
	storeFlags
}

func (f auditStore) open(ctx context.Context) (backend, error) {
	if f.embedded() && !exists(filepath.Join(f.Data, sqlite.FileName)) {
		return nil, fmt.Errorf("no event store in %s", f.Data)
	}
	return f.storeFlags.open(ctx, f.Data, slog.New(slog.DiscardHandler))
}

type auditHistoryCmd struct {
	auditStore
	OrderID string `arg:"" help:"The order's id."`
	Format  string `default:"table" enum:"table,json,jsonl" help:"Output: 'table' for people; 'json', the API's page of events (GET /v1/orders/{id}/events) holding every event, each with its stream; or 'jsonl', one event a line as 'audit export' writes them."`
}

func (c *auditHistoryCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	out := &historyWriter{format: c.Format, w: e.stdout, lines: []audit.Line{}}
	for ev, err := range s.ReadStream(ctx, command.StreamName(c.OrderID), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return orderNotFound(c.OrderID)
		}
		if err != nil {
			return err
		}
		if err := out.add(ev); err != nil {
			return err
		}
	}
	return out.end()
}

// historyWriter prints an order's events, as they are read, in one of the formats.
type historyWriter struct {
	format string
	w      io.Writer
	table  *tabwriter.Writer // from the first event on: an unknown order prints nothing
	lines  []audit.Line      // json: written at the end, as one document
}

// add writes ev as the API's event history shows it: upcast to the current version of its type
// (export, by contrast, writes the log as stored).
func (h *historyWriter) add(ev eventstore.RecordedEvent) error {
	stored := ev.Type
	typ, data, err := order.Upcast(ev.Type, ev.Data)
	if err != nil {
		return fmt.Errorf("%s@%d: %w", ev.Stream, ev.Revision, err)
	}
	ev.Type, ev.Data = typ, data
	line := audit.LineOf(ev)
	if typ != stored {
		line.StoredType = stored
	}
	switch h.format {
	case "table":
		if h.table == nil {
			h.table = tabwriter.NewWriter(h.w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(h.table, "REVISION\tPOSITION\tRECORDED\tTYPE\tPRINCIPAL\tCOMMAND\tIDEMPOTENCY KEY")
		}
		var md command.Metadata
		json.Unmarshal(ev.Metadata, &md)
		_, err := fmt.Fprintf(h.table, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", ev.Revision, ev.Position.Commit, ev.Recorded.Format(time.RFC3339Nano), ev.Type, md.Principal, md.Command, md.IdempotencyKey)
		return err
	case "jsonl":
		return json.NewEncoder(h.w).Encode(line)
	default:
		h.lines = append(h.lines, line)
		return nil
	}
}

func (h *historyWriter) end() error {
	switch {
	case h.format == "json":
		return writeJSON(h.w, struct {
			Events []audit.Line `json:"events"`
		}{h.lines})
	case h.table != nil:
		return h.table.Flush()
	}
	return nil
}

func orderNotFound(id string) error {
	return fmt.Errorf("order %s not found", id)
}

type auditStateCmd struct {
	auditStore
	OrderID  string  `arg:"" help:"The order's id."`
	Revision *uint64 `xor:"point" group:"point" placeholder:"N" help:"Fold up to and including the event at revision N (an order's first event is revision 0)."`
	At       rfc3339 `xor:"point" group:"point" placeholder:"TIME" help:"Fold the events recorded at or before TIME, an RFC 3339 time such as 2026-11-29T12:00:00Z."`
	formatFlag
}

// pointGroup shows --revision and --at apart in the help, as the alternatives they are:
// kong's usage line would show two required flags side by side.
var pointGroup = kong.Group{Key: "point", Title: "Point of the order's history (give exactly one):"}

// Validate asks for a point: the xor group refuses both, but not neither once the flags
// are no longer marked required.
func (c *auditStateCmd) Validate() error {
	if c.Revision == nil && c.At.IsZero() {
		return errors.New("give the point of the order's history to fold up to: --revision N or --at TIME")
	}
	return nil
}

// rfc3339 is a time given on the command line, refused in the user's terms rather than with
// Go's reference layout.
type rfc3339 struct{ time.Time }

func (t *rfc3339) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("time", &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time such as 2026-11-29T12:00:00Z, not %q", s)
	}
	t.Time = v
	return nil
}

func (c *auditStateCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	state, last, ok, err := (&command.Handler{Store: s}).LoadAt(ctx, c.OrderID, command.Point{Revision: c.Revision, At: c.At.Time})
	switch {
	case err != nil:
		return err
	case !ok:
		return absentAt(ctx, s, c.OrderID, c.At.Time)
	case c.Revision != nil && last < *c.Revision:
		return fmt.Errorf("order %s has no revision %d: its last is %d", c.OrderID, *c.Revision, last)
	}
	v := api.ViewState(last, state)
	if c.Format == "json" {
		return writeJSON(e.stdout, v)
	}
	return printState(e.stdout, v)
}

// absentAt says why an order had no state at the time asked: it never existed, or not yet.
func absentAt(ctx context.Context, s eventstore.Store, id string, at time.Time) error {
	ev, found, err := eventstore.First(ctx, s, command.StreamName(id))
	switch {
	case err != nil:
		return err
	case !found:
		return orderNotFound(id)
	}
	return fmt.Errorf("order %s did not exist at %s: its first event was recorded at %s",
		id, at.Format(time.RFC3339Nano), ev.Recorded.Format(time.RFC3339Nano))
}

// printState prints an order's state as a table: its fields, then its lines and any
// duplicate charges. Amounts are in the currency's minor units, as in the API.
func printState(w io.Writer, v api.StateView) error {
	o := v.Order
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fields := [][2]string{
		{"ORDER", o.ID}, {"REVISION", fmt.Sprint(v.Revision)}, {"VERSION", fmt.Sprint(o.Version)},
		{"STATUS", o.Status}, {"CUSTOMER", o.CustomerID}, {"CLIENT REFERENCE", o.ClientReference},
		{"CURRENCY", o.Currency}, {"TOTAL", fmt.Sprint(o.Total)}, {"PAID", fmt.Sprint(o.Paid)},
		{"REFUNDED", fmt.Sprint(o.Refunded)}, {"PAYMENT", o.PaymentID}, {"REFUND", o.RefundID},
		{"CARRIER", o.Carrier}, {"TRACKING NUMBER", o.TrackingNumber},
		{"CREATED", o.CreatedAt.Format(time.RFC3339Nano)}, {"UPDATED", o.UpdatedAt.Format(time.RFC3339Nano)},
	}
	for _, f := range fields {
		if f[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
		}
	}
	fmt.Fprintln(tw, "\nSKU\tQUANTITY\tUNIT PRICE")
	for _, l := range o.Lines {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", l.SKU, l.Quantity, l.UnitPrice)
	}
	if len(o.DuplicateCharges) > 0 {
		fmt.Fprintln(tw, "\nDUPLICATE CHARGE\tAMOUNT\tREASON")
		for _, d := range o.DuplicateCharges {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", d.PaymentID, d.Amount, d.Reason)
		}
	}
	return tw.Flush()
}

type auditExportCmd struct {
	auditStore
}

func (c *auditExportCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	enc := json.NewEncoder(e.stdout)
	for ev, err := range s.ReadAll(ctx, eventstore.ReadAllOptions{}) {
		if err != nil {
			return err
		}
		if err := enc.Encode(audit.LineOf(ev)); err != nil {
			return err
		}
	}
	return nil
}

type auditVerifyCmd struct {
	auditStore
	Report string `help:"Also write the full report, as JSON, to this file."`
	formatFlag
}

func (c *auditVerifyCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	v := &audit.Verifier{Feed: s}
	if path := filepath.Join(c.Data, readModelsFile); exists(path) {
		db, err := sqlite.OpenDB(path)
		if err != nil {
			return err
		}
		defer db.Close()
		v.Reads = &projections.Queries{DB: db}
	}
	if c.Format == "table" {
		v.Progress = verifyProgress(e)
	}
	rep, err := v.Verify(ctx)
	if err != nil {
		return err
	}
	if rep.Findings == nil {
		rep.Findings = []audit.Finding{} // a list, empty, for a program reading the JSON
	}
	if c.Report != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.Report, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c.Format == "json" {
		err = writeJSON(e.stdout, rep)
	} else {
		err = printReport(e.stdout, rep, v.Reads != nil)
	}
	if err != nil {
		return err
	}
	if len(rep.Findings) > 0 {
		return fmt.Errorf("%d findings", len(rep.Findings))
	}
	return nil
}

// verifyProgress shows the verification's progress on a terminal; nothing otherwise.
func verifyProgress(e *env) func(at, head eventstore.Position) {
	if !isTerminal(e.stdout) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(at, head eventstore.Position) {
		if bar == nil {
			bar = terminalBar(e.stdout, "verifying", head.Commit)
		}
		bar.Set64(int64(at.Commit))
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalBar returns a bar of the progress from 0 to total on w, with a predicted time, if w
// is a terminal; else nil, and the caller prints lines or nothing.
func terminalBar(w io.Writer, description string, total uint64, more ...progressbar.Option) *progressbar.ProgressBar {
	if !isTerminal(w) {
		return nil
	}
	opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(description),
		progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100 * time.Millisecond), progressbar.OptionFullWidth()}
	return progressbar.NewOptions64(int64(max(total, 1)), append(opts, more...)...)
}

// printReport prints a verification's report for people: its figures, then each finding.
func printReport(w io.Writer, rep audit.Report, readModels bool) error {
	fmt.Fprintf(w, "\nverified %d events in %d order streams and %d key streams (%d read-model rows) in %.1fs: %.0f events/s\n",
		rep.Events, rep.Streams, rep.KeyStreams, rep.RowsChecked, rep.Seconds, rep.EventsPerSecond)
	if readModels && !rep.OrdersCompared {
		fmt.Fprintln(w, "the orders read model was not compared: the file holds none of this version (a rebuild will make it)")
	}
	if readModels && !rep.LookupsCompared {
		fmt.Fprintln(w, "the lookups were not compared: the file holds none of this version (a rebuild will make them)")
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f)
	}
	if len(rep.Findings) == 0 {
		_, err := fmt.Fprintln(w, "no findings")
		return err
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
