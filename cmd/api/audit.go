package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

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
	if f.Store != "kurrentdb" && !exists(filepath.Join(f.Data, sqlite.FileName)) {
		return nil, fmt.Errorf("no event store in %s", f.Data)
	}
	return f.storeFlags.open(ctx, f.Data, slog.New(slog.DiscardHandler))
}

// eventLine is an event as the audit commands print it.
type eventLine struct {
	Stream     string          `json:"stream"`
	Revision   uint64          `json:"revision"`
	Position   uint64          `json:"position"`
	Type       string          `json:"type"`
	RecordedAt time.Time       `json:"recordedAt"`
	Data       json.RawMessage `json:"data"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

func lineOf(e eventstore.RecordedEvent) eventLine {
	l := eventLine{Stream: e.Stream, Revision: e.Revision, Position: e.Position.Commit, Type: e.Type, RecordedAt: e.Recorded, Data: e.Data}
	if len(e.Metadata) > 0 {
		l.Metadata = e.Metadata
	}
	return l
}

type auditHistoryCmd struct {
	auditStore
	OrderID string `arg:"" help:"The order's id."`
	Format  string `default:"table" enum:"table,json,jsonl" help:"table, json or jsonl."`
}

func (c *auditHistoryCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	var lines []eventLine
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if c.Format == "table" {
		fmt.Fprintln(w, "REVISION\tPOSITION\tRECORDED\tTYPE\tPRINCIPAL\tCOMMAND\tIDEMPOTENCY KEY")
	}
	enc := json.NewEncoder(e.stdout)
	for ev, err := range s.ReadStream(ctx, command.StreamName(c.OrderID), eventstore.ReadStreamOptions{}) {
		if err != nil {
			return err
		}
		switch c.Format {
		case "table":
			var md command.Metadata
			json.Unmarshal(ev.Metadata, &md)
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", ev.Revision, ev.Position.Commit, ev.Recorded.Format(time.RFC3339Nano), ev.Type, md.Principal, md.Command, md.IdempotencyKey)
		case "jsonl":
			if err := enc.Encode(lineOf(ev)); err != nil {
				return err
			}
		default:
			lines = append(lines, lineOf(ev))
		}
	}
	if c.Format == "json" {
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	return w.Flush()
}

type auditStateCmd struct {
	auditStore
	OrderID  string    `arg:"" help:"The order's id."`
	Revision *uint64   `xor:"point" group:"point" placeholder:"N" help:"Fold up to and including the event at revision N (an order's first event is revision 0)."`
	At       time.Time `xor:"point" group:"point" placeholder:"TIME" help:"Fold the events recorded at or before TIME, an RFC 3339 time such as 2026-11-29T12:00:00Z."`
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

func (c *auditStateCmd) Run(ctx context.Context, e *env) error {
	s, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	state, last, ok, err := (&command.Handler{Store: s}).LoadAt(ctx, c.OrderID, command.Point{Revision: c.Revision, At: c.At})
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the order did not exist then")
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Revision uint64      `json:"revision"`
		State    order.State `json:"state"`
	}{last, state})
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
		if err := enc.Encode(lineOf(ev)); err != nil {
			return err
		}
	}
	return nil
}

type auditVerifyCmd struct {
	auditStore
	Report string `help:"Also write the full report, as JSON, to this file."`
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
	if f, ok := e.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		v.Progress = func(at, head eventstore.Position) {
			if bar == nil {
				bar = progressbar.NewOptions64(int64(max(head.Commit, 1)), progressbar.OptionSetWriter(e.stdout),
					progressbar.OptionSetDescription("verifying"), progressbar.OptionSetPredictTime(true), progressbar.OptionFullWidth())
			}
			bar.Set64(int64(at.Commit))
		}
	}
	rep, err := v.Verify(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nverified %d events in %d order streams and %d key streams (%d read-model rows) in %.1fs: %.0f events/s\n",
		rep.Events, rep.Streams, rep.KeyStreams, rep.RowsChecked, rep.Seconds, rep.EventsPerSecond)
	if v.Reads != nil && !rep.OrdersCompared {
		fmt.Fprintln(e.stdout, "the orders read model was not compared: the file holds none of this version (a rebuild will make it)")
	}
	if v.Reads != nil && !rep.LookupsCompared {
		fmt.Fprintln(e.stdout, "the lookups were not compared: the file holds none of this version (a rebuild will make them)")
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(e.stdout, f)
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
	if len(rep.Findings) > 0 {
		return fmt.Errorf("%d findings", len(rep.Findings))
	}
	fmt.Fprintln(e.stdout, "no findings")
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
