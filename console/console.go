package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/api"
	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Defaults of Config.
const (
	DefaultMaxSessions             = 10_000
	DefaultMaxSessionsPerPrincipal = 16
	DefaultSessionTTL              = 8 * time.Hour
)

// Config sets the console's bounds. Zero values take the defaults.
type Config struct {
	// MaxSessions bounds the sessions held in memory; signing in past it ends the oldest.
	MaxSessions int
	// MaxSessionsPerPrincipal bounds the sessions of one principal; its signing in past it
	// ends its own oldest, never another principal's.
	MaxSessionsPerPrincipal int
	// SessionTTL is how long a session lasts from its sign-in.
	SessionTTL time.Duration
	// SecureCookies marks every cookie Secure, whatever the request came over: for a console
	// served behind a proxy that ends TLS. Without it, only requests over TLS get Secure cookies.
	SecureCookies bool
}

// Services are what the console reads and runs, the same the API does.
type Services struct {
	Orders      *command.Handler
	Reads       projections.Queries
	Projections *projections.Runner
	Feed        eventstore.Feed
	Log         *slog.Logger
	// Authenticate returns the caller of a key's hash, as the API authenticates it.
	Authenticate func(sum [sha256.Size]byte) (access.Caller, bool)
	// CaughtUp waits until the projection has applied the log as it is now, as an API read
	// without minPosition does.
	CaughtUp func(ctx context.Context, projection string) error
	// Development: the server has no API keys, so every request is the principal "local" with
	// every role, without signing in, and only on loopback names (access.LoopbackHost).
	Development bool
}

// Console serves the console's pages. Construct it with New; it is an http.Handler for
// /console/ and everything under it.
type Console struct {
	svc      Services
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	verify   *verifyJob
	dev      development
	// secureCookies: Config.SecureCookies.
	secureCookies bool
}

// New returns the console of svc. ctx bounds the work it starts in the background (a verify of
// the whole log).
func New(ctx context.Context, svc Services, cfg Config) (*Console, error) {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxSessionsPerPrincipal <= 0 {
		cfg.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{svc: svc, sessions: newSessions(cfg.MaxSessions, cfg.MaxSessionsPerPrincipal, cfg.SessionTTL), pages: pages, mux: http.NewServeMux(),
		verify: &verifyJob{ctx: ctx}, dev: newDevelopment(), secureCookies: cfg.SecureCookies}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	assets, _ := fs.Sub(assetFiles, "assets")
	c.mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", http.FileServerFS(assets)))
	c.mux.HandleFunc("GET /console", redirect("/console/orders"))
	c.mux.HandleFunc("GET /console/{$}", redirect("/console/orders"))
	c.mux.HandleFunc("GET /console/sign-in", c.signInPage)
	c.mux.HandleFunc("POST /console/sign-in", c.signIn)
	c.mux.HandleFunc("POST /console/sign-out", c.signedIn(c.signOut))
	c.mux.HandleFunc("GET /console/orders", c.signedIn(c.ordersPage))
	c.mux.HandleFunc("GET /console/orders/{id}", c.signedIn(c.orderPage))
	c.mux.HandleFunc("GET /console/orders/{id}/events.jsonl", c.signedIn(c.exportOrder))
	c.mux.HandleFunc("GET /console/keys", c.signedIn(c.keyPage))
	c.mux.HandleFunc("GET /console/provider-events", c.signedIn(c.providerEventsPage))
	c.mux.HandleFunc("GET /console/admin/projections", c.signedIn(c.projectionsPage))
	c.mux.HandleFunc("POST /console/admin/projections/{name}/rebuild", c.signedIn(c.rebuild))
	c.mux.HandleFunc("GET /console/admin/verify", c.signedIn(c.verifyPage))
	c.mux.HandleFunc("POST /console/admin/verify", c.signedIn(c.startVerify))
	c.mux.HandleFunc("/console/", c.signedIn(func(w http.ResponseWriter, r *http.Request, v *visit) {
		c.fail(w, r, v, errNoPage)
	}))
}

func redirect(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusSeeOther) }
}

// ServeHTTP serves a console page with the headers every page has: no caching (pages show a
// principal's data), no framing, scripts and styles from the console only.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// visit is a signed-in request: its session and the caller its key is now; or, in
// development mode, a request of the principal of every request there, without a session.
type visit struct {
	session     *session // nil in development mode
	caller      access.Caller
	csrf        string // the token the visit's forms carry
	development bool
}

// The messages of the sign-in page, by the m parameter it is sent to with.
var signInMessages = map[string]string{
	"expired":    "Your session has expired. Sign in again.",
	"signed-out": "You have signed out.",
	"required":   "Sign in to continue.",
	"key-gone":   "The key of your session is no longer accepted. Sign in with a current key.",
}

// signedIn runs h for a request with a live session, else sends the browser to sign in; in
// development mode, for every request to a loopback name. A POST must carry the visit's CSRF
// token.
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := c.visitOf(w, r)
		if !ok {
			return
		}
		api.NoteCaller(r, v.caller)
		if r.Method == http.MethodPost && !sameToken(r.PostFormValue("csrf"), v.csrf) {
			c.fail(w, r, v, errCSRF)
			return
		}
		h(w, r, v)
	}
}

// visitOf is the request's visit, or false once it has answered a request that has none.
func (c *Console) visitOf(w http.ResponseWriter, r *http.Request) (*visit, bool) {
	if caller, dev := c.developmentCaller(); dev {
		return c.developmentVisit(w, r, caller)
	}
	cookie, err := r.Cookie(sessionCookie)
	if err != nil {
		http.Redirect(w, r, "/console/sign-in?m=required", http.StatusSeeOther)
		return nil, false
	}
	s, expired := c.sessions.lookup(cookie.Value)
	if s == nil {
		c.clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, "/console/sign-in?m="+map[bool]string{true: "expired", false: "required"}[expired], http.StatusSeeOther)
		return nil, false
	}
	caller, ok := c.svc.Authenticate(s.keyHash)
	if !ok {
		c.sessions.end(s.id)
		c.clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, "/console/sign-in?m=key-gone", http.StatusSeeOther)
		return nil, false
	}
	return &visit{session: s, caller: caller, csrf: s.csrf}, true
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Errors of the console's own, shown as pages.
var (
	errNoPage = errors.New("there is no such page in the console")
	errCSRF   = errors.New("the form was not sent from this console's page; reload the page and try again")
	// errBadInput: a parameter of the page is not what it must be.
	errBadInput = errors.New("bad request")
)

// page is what every page's template gets.
type page struct {
	Title  string
	Caller access.Caller
	CSRF   string
	Audit  bool // the caller may see the audit's pages (auditors and admins)
	Admin  bool
	// Development: the server has no keys, and every request is Caller (development mode).
	Development bool
	Data        any
}

// render writes the page name with data for the visit (nil before sign-in).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, v *visit, data any) {
	p := page{Title: title, Data: data}
	if v != nil {
		p.Caller, p.CSRF, p.Development = v.caller, v.csrf, v.development
		p.Audit, p.Admin = v.caller.MayAudit(), v.caller.Roles.Has(access.RoleAdmin)
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.svc.Log.ErrorContext(r.Context(), "console page", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// failure is what the error page shows.
type failure struct {
	Status    int
	Heading   string
	Detail    string
	RequestID string
}

// fail answers err with a page: its status and detail are the API's for the same error
// (api.StatusOf), and a 5xx shows the request id to quote instead of the cause, which is logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	f := failure{RequestID: w.Header().Get("X-Request-Id")}
	switch {
	case errors.Is(err, errNoPage):
		f.Status, f.Heading, f.Detail = http.StatusNotFound, "Page not found", err.Error()
	case errors.Is(err, errCSRF):
		f.Status, f.Heading, f.Detail = http.StatusForbidden, "Form expired", err.Error()
	case errors.Is(err, errNotLoopback):
		f.Status, f.Heading, f.Detail = http.StatusForbidden, "Forbidden", err.Error()
	case errors.Is(err, errUnknownOrder), api.IsNotFound(err) && strings.HasPrefix(r.URL.Path, "/console/orders/"):
		f.Status, f.Heading = http.StatusNotFound, "Order not found"
		f.Detail = "There is no such order, or it is not one your key may see. Check the id, or find the order in the list."
	case errors.Is(err, errBadInput):
		f.Status, f.Heading, f.Detail = http.StatusBadRequest, "Bad request", err.Error()
	default:
		f.Status, f.Detail = api.StatusOf(err)
		f.Heading = http.StatusText(f.Status)
	}
	switch {
	case f.Status == http.StatusServiceUnavailable:
		f.Heading, f.Detail = "Not ready yet", f.Detail+". Reload the page in a moment."
	case f.Status >= 500:
		c.svc.Log.ErrorContext(r.Context(), "console", slog.String("error", err.Error())) // the request's id comes with its context
	}
	c.render(w, r, f.Status, "error", f.Heading, v, f)
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", name)
		if err != nil {
			return nil, err
		}
		pages[base] = t
	}
	return pages, nil
}
