package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/acme/orders/audit"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
)

// maxFindings bounds the findings of a verify kept to show; the report counts them all.
const maxFindings = 1000

type projectionsData struct {
	Projections []projections.Status
	Running     bool   // a rebuild or catch-up is under way, or asked for: the page follows it
	Live        string // the URL of the page's live part
}

// projectionsPage shows each projection's state and lag, as GET /admin/projections does, with
// a button to rebuild it. While one rebuilds or catches up, a script reloads the table.
func (c *Console) projectionsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	if err := v.caller.Need(v.caller.MayAdminister(), "read the projections"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	st, err := c.svc.Projections.Status(ctx)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	// A rebuild asked for starts a moment later: ?rebuild=NAME&from=GENERATION, which the
	// rebuild's answer sends the browser to, follows NAME until a later generation is live.
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("from"))
	d := projectionsData{Projections: st, Live: "/console/admin/projections?" + url.Values{"part": {"live"}, "rebuild": {q.Get("rebuild")}, "from": {q.Get("from")}}.Encode()}
	for _, p := range st {
		asked := p.Name == q.Get("rebuild") && p.Generation <= from && p.State != projections.StateFailed
		d.Running = d.Running || asked || p.Rebuild != nil || p.State == projections.StateRebuilding || p.State == projections.StateCatchingUp
	}
	c.renderPart(w, r, "projections", "Projections", v, d)
}

// rebuild starts a rebuild of the projection, as POST /admin/projections/{name}/rebuild does.
func (c *Console) rebuild(w http.ResponseWriter, r *http.Request, v *visit) {
	name := r.PathValue("name")
	if err := v.caller.Need(v.caller.MayAdminister(), "rebuild a projection"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	st, err := c.svc.Projections.Status(r.Context())
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	from := 0
	for _, p := range st {
		if p.Name == name {
			from = p.Generation
		}
	}
	if err := c.svc.Projections.Rebuild(name); err != nil {
		if errors.Is(err, projections.ErrUnknownProjection) {
			err = fmt.Errorf("%w: %v", errNoPage, err)
		}
		c.fail(w, r, v, err)
		return
	}
	http.Redirect(w, r, "/console/admin/projections?"+url.Values{"rebuild": {name}, "from": {strconv.Itoa(from)}}.Encode(), http.StatusSeeOther)
}

// renderPart renders the page name, or only its "live" part when the page's script asks for
// it (?part=live) to follow the progress shown there.
func (c *Console) renderPart(w http.ResponseWriter, r *http.Request, name, title string, v *visit, data any) {
	if r.URL.Query().Get("part") != "live" {
		c.render(w, r, http.StatusOK, name, title, v, data)
		return
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "live", page{Data: data, CSRF: v.csrf}); err != nil {
		c.fail(w, r, v, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// verifyJob is the verify of the whole log the console runs: one at a time, in the
// background, its progress and its last report kept to show.
type verifyJob struct {
	ctx context.Context

	mu       sync.Mutex
	running  bool
	started  time.Time
	at, head uint64 // log positions: reached, and the head when it started
	report   *audit.Report
	findings int // of the last report, before maxFindings cut its list
	err      string
}

// verifyView is a copy of the job's state, for a page.
type verifyView struct {
	Running          bool
	Started          time.Time
	At, Head         uint64
	Report           *audit.Report
	Findings         int
	Err              string
	FindingsTruncate bool
}

func (j *verifyJob) view() verifyView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := verifyView{Running: j.running, Started: j.started, At: j.at, Head: j.head, Report: j.report, Findings: j.findings, Err: j.err}
	v.FindingsTruncate = j.report != nil && j.findings > len(j.report.Findings)
	return v
}

// start runs v unless a verify runs already; it reports whether it started one.
func (j *verifyJob) start(v *audit.Verifier, log *slog.Logger) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running {
		return false
	}
	j.running, j.started, j.at, j.head, j.err = true, time.Now(), 0, 0, ""
	v.Progress = func(at, head eventstore.Position) {
		j.mu.Lock()
		j.at, j.head = at.Commit, head.Commit
		j.mu.Unlock()
	}
	go func() {
		rep, err := v.Verify(j.ctx)
		j.mu.Lock()
		defer j.mu.Unlock()
		j.running = false
		if err != nil {
			log.Error("console verify", slog.String("error", err.Error()))
			j.err = err.Error()
			return
		}
		j.findings = len(rep.Findings)
		rep.Findings = rep.Findings[:min(len(rep.Findings), maxFindings)]
		j.report = &rep
	}()
	return true
}

func (c *Console) verifyPage(w http.ResponseWriter, r *http.Request, v *visit) {
	if err := v.caller.Need(v.caller.MayAdminister(), "verify the log"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.renderPart(w, r, "verify", "Verify the log", v, c.verify.view())
}

// startVerify starts a verify of the whole log, as 'api audit verify' runs it, with the read
// models' drift check; the page then follows its progress.
func (c *Console) startVerify(w http.ResponseWriter, r *http.Request, v *visit) {
	if err := v.caller.Need(v.caller.MayAdminister(), "verify the log"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	reads := c.svc.Reads
	c.verify.start(&audit.Verifier{Feed: c.svc.Feed, Reads: &reads}, c.svc.Log)
	http.Redirect(w, r, "/console/admin/verify", http.StatusSeeOther)
}
