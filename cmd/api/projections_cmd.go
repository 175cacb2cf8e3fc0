package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
)

// projectionsCmd talks to a running service's admin API: rebuilds happen inside the service,
// which keeps serving meanwhile; the command starts them and follows their progress. Export
// reads the event store itself, as the audit commands do.
type projectionsCmd struct {
	Status  projectionsStatusCmd  `cmd:"" help:"Show each projection's state, checkpoint, head and lag."`
	Rebuild projectionsRebuildCmd `cmd:"" help:"Rebuild projections (${projections}) from the start of the log while the service runs."`
	Export  projectionsExportCmd  `cmd:"" help:"Build a read model as it stood at a time or log position into a new SQLite file, from the data directory; the live read models are not touched."`
}

type adminClient struct {
	URL        string `default:"http://127.0.0.1:8080" env:"API_URL" help:"Base URL of the running service."`
	APIKey     string `env:"API_KEY" placeholder:"KEY" help:"An admin's API key (not needed in development mode). Prefer API_KEY or --api-key-file: on the command line the key is visible to every user of the machine in the process list."`
	APIKeyFile string `env:"API_KEY_FILE" placeholder:"FILE" help:"File holding an admin's API key on one line."`

	key string // the key sent: from APIKey or APIKeyFile, see loadKey
}

// loadKey settles the key to send, once for all of a command's requests.
func (a *adminClient) loadKey() error {
	switch {
	case a.APIKey != "" && a.APIKeyFile != "":
		return errors.New("an API key is given twice: give either --api-key (or API_KEY) or --api-key-file (or API_KEY_FILE)")
	case a.APIKeyFile != "":
		f, err := os.Open(a.APIKeyFile)
		if err != nil {
			return fmt.Errorf("API key file: %w", err)
		}
		defer f.Close()
		if a.key, err = readSecret(f); err != nil {
			return fmt.Errorf("the API key in %s is %w", a.APIKeyFile, err)
		}
	default:
		a.key = a.APIKey
	}
	return nil
}

type projectionStatus struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Error      string  `json:"error"`
	Generation int     `json:"generation"`
	Checkpoint uint64  `json:"checkpoint"`
	Head       uint64  `json:"head"`
	LagEvents  uint64  `json:"lagEvents"`
	LagSeconds float64 `json:"lagSeconds"`
	Rebuild    *struct {
		Generation int    `json:"generation"`
		Checkpoint uint64 `json:"checkpoint"`
		Applied    uint64 `json:"applied"`
	} `json:"rebuild"`
	Comparison json.RawMessage `json:"comparison"` // as the service gives it, for --format json
}

// comparison is what the table of a rebuild's comparison shows of it.
type comparison struct {
	Live, Next              int
	At                      uint64
	Added, Removed, Changed uint64
	Tables                  []struct {
		Table                   string
		Added, Removed, Changed uint64
	}
	Samples []struct {
		Table, Change string
		Key           map[string]any
		Columns       []struct {
			Column     string
			Live, Next any
		}
	}
	Swapped  bool
	Finished string
}

// call sends a request to the service and returns the body of its answer; a refusal or no
// answer at all is told in the terms of the command line (its flags and variables).
func (a adminClient) call(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.URL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // it repeats the method and URL
		}
		return nil, fmt.Errorf("no answer from the service at %s (--url or API_URL): %w", a.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, refusal(resp, body)
	}
	return body, nil
}

// maxAdminAnswer bounds what is read of an answer: the status of every projection is a few
// hundred bytes each.
const maxAdminAnswer = 1 << 20

// refusal tells why the service refused a request, from its problem details (RFC 9457).
func refusal(resp *http.Response, body []byte) error {
	var p struct{ Title, Detail string }
	json.Unmarshal(body, &p)
	why := cmp.Or(p.Detail, p.Title, strings.TrimSpace(string(body)))
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("the service refused the API key (%s): these commands need an admin's key, in API_KEY or --api-key-file", why)
	case http.StatusForbidden:
		return fmt.Errorf("the service refused the request (%s): these commands need a key with the admin role", why)
	}
	return fmt.Errorf("the service answered %s: %s", resp.Status, why)
}

func (a adminClient) do(ctx context.Context, method, path string, out any) error {
	body, err := a.call(ctx, method, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

func (a adminClient) status(ctx context.Context) ([]projectionStatus, error) {
	var out struct {
		Projections []projectionStatus `json:"projections"`
	}
	err := a.do(ctx, http.MethodGet, "/admin/projections", &out)
	return out.Projections, err
}

type projectionsStatusCmd struct {
	adminClient
	formatFlag
}

func (c *projectionsStatusCmd) Run(ctx context.Context, e *env) error {
	if err := c.loadKey(); err != nil {
		return err
	}
	if c.Format == "json" {
		// The service's own answer, GET /admin/projections, with every field it gives.
		body, err := c.call(ctx, http.MethodGet, "/admin/projections")
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err = out.WriteTo(e.stdout)
		return err
	}
	st, err := c.status(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATE\tGENERATION\tCHECKPOINT\tHEAD\tLAG (events)\tLAG (s)\tERROR")
	for _, p := range st {
		state := p.State
		if p.Rebuild != nil {
			state = fmt.Sprintf("%s (g%d at %d)", state, p.Rebuild.Generation, p.Rebuild.Checkpoint)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%s\n", p.Name, state, p.Generation, p.Checkpoint, p.Head, p.LagEvents, p.LagSeconds, p.Error)
	}
	return w.Flush()
}

type projectionsRebuildCmd struct {
	adminClient
	Names   []string `arg:"" optional:"" help:"Projections to rebuild (${projections}); all of them when none is named."`
	Compare bool     `help:"Before swapping, compare the rebuilt rows with the live ones and print the rows added, removed and changed, with up to 20 samples. Swaps only with --swap."`
	Swap    bool     `help:"With --compare: swap the rebuilt generation in after comparing."`
	DryRun  bool     `name:"dry-run" help:"Compare, print, and drop the rebuilt generation: never swap (implies --compare)."`
	formatFlag
}

func (c *projectionsRebuildCmd) Validate() error {
	if c.DryRun && c.Swap {
		return errors.New("--dry-run never swaps: it cannot go with --swap")
	}
	return nil
}

// query is the rebuild request's query for the flags.
func (c *projectionsRebuildCmd) query() string {
	switch {
	case c.DryRun:
		return "?dryRun=true"
	case c.Compare && c.Swap:
		return "?compare=true&swap=true"
	case c.Compare:
		return "?compare=true"
	}
	return ""
}

func (c *projectionsRebuildCmd) Run(ctx context.Context, e *env) error {
	if err := c.loadKey(); err != nil {
		return err
	}
	st, err := c.status(ctx)
	if err != nil {
		return err
	}
	var known []string
	for _, p := range st {
		known = append(known, p.Name)
	}
	names := c.Names
	if len(names) == 0 {
		names = known
	}
	// Every name is checked before the first rebuild starts: a typo in the second name
	// must not leave the first rebuilt and the command failed.
	for _, name := range names {
		if !slices.Contains(known, name) {
			return fmt.Errorf("no projection named %q: the service has %s", name, strings.Join(known, ", "))
		}
	}
	for _, name := range names {
		if err := c.rebuild(ctx, e, name); err != nil {
			return err
		}
	}
	return nil
}

// rebuild starts one rebuild and follows it to the swap: a progress bar with events/s and ETA
// on a terminal, a plain line every few seconds otherwise.
func (c *projectionsRebuildCmd) rebuild(ctx context.Context, e *env, name string) error {
	before, err := c.find(ctx, name)
	if err != nil {
		return err
	}
	var started map[string]any
	if err := c.do(ctx, http.MethodPost, "/admin/projections/"+name+"/rebuild"+c.query(), &started); err != nil {
		return err
	}
	bar := terminalBar(e.stdout, name, before.Head,
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"))
	start, lastLine := time.Now(), time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		p, err := c.find(ctx, name)
		if err != nil {
			return err
		}
		compared := p.Rebuild == nil && len(p.Comparison) > 0 && !bytes.Equal(p.Comparison, before.Comparison)
		switch {
		case p.State == "failed":
			return fmt.Errorf("projection %s failed: %s", name, p.Error)
		case c.query() != "" && compared:
			if bar != nil {
				bar.Finish()
				fmt.Fprintln(e.stdout)
			}
			return c.printComparison(e, name, p.Comparison)
		case c.query() == "" && p.Rebuild == nil && p.Generation > before.Generation:
			if bar != nil {
				bar.ChangeMax64(int64(max(p.Checkpoint, 1)))
				bar.Set64(int64(max(p.Checkpoint, 1)))
				bar.Finish()
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "%s: rebuilt as generation %d in %s, at position %d\n", name, p.Generation, time.Since(start).Round(time.Millisecond), p.Checkpoint)
			return nil
		case p.Rebuild != nil:
			if bar != nil {
				bar.ChangeMax64(int64(max(p.Head, 1)))
				bar.Set64(int64(p.Rebuild.Checkpoint))
			} else if time.Since(lastLine) >= 2*time.Second {
				lastLine = time.Now()
				rate := float64(p.Rebuild.Applied) / time.Since(start).Seconds()
				fmt.Fprintf(e.stdout, "%s: rebuilding, at position %d of %d, %d events applied, %.0f events/s\n", name, p.Rebuild.Checkpoint, p.Head, p.Rebuild.Applied, rate)
			}
		}
	}
}

func (c *projectionsRebuildCmd) find(ctx context.Context, name string) (projectionStatus, error) {
	st, err := c.status(ctx)
	if err != nil {
		return projectionStatus{}, err
	}
	for _, p := range st {
		if p.Name == name {
			return p, nil
		}
	}
	return projectionStatus{}, errors.New("no projection named " + name)
}

// printComparison prints a rebuild's comparison: the service's JSON, or tables.
func (c *projectionsRebuildCmd) printComparison(e *env, name string, raw json.RawMessage) error {
	if c.Format == "json" {
		var out bytes.Buffer
		if err := json.Indent(&out, raw, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err := out.WriteTo(e.stdout)
		return err
	}
	var cmp comparison
	if err := json.Unmarshal(raw, &cmp); err != nil {
		return err
	}
	what := "dropped it; the live generation is unchanged"
	if cmp.Swapped {
		what = fmt.Sprintf("swapped it in: generation %d is live", cmp.Next)
	}
	fmt.Fprintf(e.stdout, "%s: generation %d against live generation %d at position %d: %d added, %d removed, %d changed; %s\n\n",
		name, cmp.Next, cmp.Live, cmp.At, cmp.Added, cmp.Removed, cmp.Changed, what)
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tADDED\tREMOVED\tCHANGED")
	for _, t := range cmp.Tables {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", t.Table, t.Added, t.Removed, t.Changed)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(cmp.Samples) == 0 {
		return nil
	}
	fmt.Fprintf(e.stdout, "\nsamples (up to 20):\n")
	w = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tCHANGE\tKEY\tCOLUMN\tLIVE\tNEXT")
	for _, s := range cmp.Samples {
		key, _ := json.Marshal(s.Key)
		if len(s.Columns) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t\t\t\n", s.Table, s.Change, key)
		}
		for _, col := range s.Columns {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Table, s.Change, key, col.Column, cell(col.Live), cell(col.Next))
		}
	}
	return w.Flush()
}

// cell is a sample's value in a table: JSON, on one line, cut to 60 characters.
func cell(v any) string {
	b, _ := json.Marshal(v)
	s := strings.ReplaceAll(string(b), "\n", " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}
