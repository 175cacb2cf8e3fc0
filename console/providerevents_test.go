package console

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/api"
	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/acme/orders/providers"
	"github.com/oklog/ulid/v2"
)

// fixture is a console over a SQLite store and its read models in a temp dir, the
// projections running, with a client (alice), an auditor (audrey) and an admin (adam), each
// of whom signs in with a key that is its name.
type fixture struct {
	c        *Console
	store    *sqlite.Store
	orders   *command.Handler
	sessions map[string]string // the session's id by principal
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(filepath.Join(dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	runner := &projections.Runner{DB: db, Feed: store, Projections: []projections.Projection{projections.Orders{}, projections.Lookups{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); runner.Run(ctx) }()
	<-runner.Started()
	t.Cleanup(func() { cancel(); <-done; db.Close(); store.Close() })
	callers := map[[sha256.Size]byte]access.Caller{}
	for _, c := range []access.Caller{{Principal: "alice", Roles: access.RoleClient},
		{Principal: "audrey", Roles: access.RoleAuditor}, {Principal: "adam", Roles: access.RoleAdmin}} {
		callers[api.HashKey(c.Principal)] = c
	}
	orders := &command.Handler{Store: store}
	svc := Services{Orders: orders, Reads: projections.Queries{DB: db}, Projections: runner, Feed: store,
		Log: slog.New(slog.DiscardHandler),
		Authenticate: func(sum [sha256.Size]byte) (access.Caller, bool) {
			c, ok := callers[sum]
			return c, ok
		},
		CaughtUp: func(ctx context.Context, name string) error {
			head, err := store.Head(ctx)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return runner.WaitFor(ctx, name, head)
		}}
	c, err := New(ctx, svc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{c: c, store: store, orders: orders, sessions: map[string]string{}}
}

// get returns the status and body of the page at path, to principal signed in.
func (f *fixture) get(t *testing.T, principal, path string) (int, string) {
	t.Helper()
	id, ok := f.sessions[principal]
	if !ok {
		s, _ := f.c.sessions.start(api.HashKey(principal), principal)
		id, f.sessions[principal] = s.id, s.id
	}
	r := httptest.NewRequest("GET", path, nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// record records a provider's event in the provider log.
func (f *fixture) record(t *testing.T, provider, eventID, orderID, reason string) {
	t.Helper()
	a, err := providers.LogAppend(providers.Unapplied{Provider: provider, Principal: "alice",
		EventID: eventID, EventType: "payment.succeeded", OrderID: orderID, Reason: reason, ReceivedAt: time.Now()})
	if err == nil {
		_, err = f.store.Append(context.Background(), a.Stream, a.Expected, a.Events...)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// paidOrder is a new order of alice's, paid, and then told by provider psp that its payment
// failed: an event the order records as not applied.
func (f *fixture) paidOrder(t *testing.T, lateFailure string) string {
	t.Helper()
	ctx := context.Background()
	id := ulid.Make().String()
	eur := order.Money{Amount: 2000, Currency: "EUR"}
	md := command.Metadata{Principal: "alice"}
	for _, c := range []order.Command{
		order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR", Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur}}},
		order.StartPayment{PaymentID: "pay-1", Amount: eur},
		order.ConfirmPayment{PaymentID: "pay-1", Amount: eur},
	} {
		if _, err := f.orders.Handle(ctx, id, c, md); err != nil {
			t.Fatal(err)
		}
	}
	res, _ := f.orders.Handle(ctx, id, order.ProviderEvent{Provider: "psp", EventID: lateFailure, EventType: "payment.failed",
		Report: order.FailPayment{PaymentID: "pay-1", Reason: "card declined"}}, md)
	if len(res.Events) != 1 {
		t.Fatalf("the late failure recorded %d events, want 1", len(res.Events))
	}
	return id
}

const providerEventsLink = `href="/console/provider-events"`

// The provider events page is the API's GET /v1/provider-events to the same callers:
// auditors and admins see every principal's events, each order a link, and the page in
// their menu; a client is refused it and has no link to it.
func TestProviderEventsAreAuditorsAndAdminsOnly(t *testing.T) {
	f := newFixture(t)
	id := f.paidOrder(t, "evt-late-failure")
	f.record(t, "psp", "evt-no-order", "", "no order of alice started payment \"pay-nobody\"")
	f.record(t, "stripe", "evt-named", "<b>not-an-order", "no order of alice started payment \"pay-2\"")

	if status, body := f.get(t, "alice", "/console/provider-events"); status != http.StatusForbidden || strings.Contains(body, "evt-") {
		t.Errorf("the page, to a client: %d; want 403 and no event:\n%s", status, body)
	}
	if status, body := f.get(t, "alice", "/console/orders"); status != http.StatusOK || strings.Contains(body, providerEventsLink) {
		t.Errorf("a client's orders page: %d, with a link to the provider events %v", status, strings.Contains(body, providerEventsLink))
	}
	for _, who := range []string{"audrey", "adam"} {
		status, body := f.get(t, who, "/console/provider-events")
		if status != http.StatusOK {
			t.Fatalf("the page, to %s: %d\n%s", who, status, body)
		}
		for _, want := range []string{
			"evt-late-failure", "payment.failed", `<a href="/console/orders/` + id + `">`,
			"evt-no-order", "no order of alice started payment &#34;pay-nobody&#34;",
			"evt-named", "<code>&lt;b&gt;not-an-order</code>", // escaped, and no link
			providerEventsLink,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the page, to %s, lacks %s", who, want)
			}
		}
		if _, body := f.get(t, who, "/console/orders"); !strings.Contains(body, providerEventsLink) {
			t.Errorf("%s's orders page has no link to the provider events", who)
		}
	}
}

// The page lists 50 events a page, newest first, with a link to the older ones that keeps
// the provider filter; a cursor that is no log position is a bad request.
func TestProviderEventsPageByCursorAndFilter(t *testing.T) {
	f := newFixture(t)
	for i := range unappliedPage + 2 {
		f.record(t, "psp", fmt.Sprintf("evt-psp-%03d", i), "", "unknown payment")
	}
	f.record(t, "stripe", "evt-stripe", "", "unknown payment")

	_, first := f.get(t, "audrey", "/console/provider-events?provider=psp")
	if n := strings.Count(first, "<code>evt-psp-"); n != unappliedPage || strings.Contains(first, "evt-stripe") ||
		!strings.Contains(first, "evt-psp-051") || strings.Contains(first, "evt-psp-001<") {
		t.Fatalf("psp's first page lists %d of its events, want the newest %d alone:\n%s", n, unappliedPage, first)
	}
	older := first[strings.Index(first, `rel="next"`)-80:]
	older = older[strings.Index(older, `href="`)+len(`href="`):]
	older = strings.ReplaceAll(older[:strings.Index(older, `"`)], "&amp;", "&")
	if !strings.Contains(older, "provider=psp") || !strings.Contains(older, "before=") {
		t.Fatalf("the older page's link %q; want the filter and the cursor", older)
	}
	_, second := f.get(t, "audrey", older)
	if n := strings.Count(second, "<code>evt-psp-"); n != 2 || !strings.Contains(second, "evt-psp-000") ||
		strings.Contains(second, `rel="next"`) || !strings.Contains(second, `href="/console/provider-events?provider=psp">Newest`) {
		t.Errorf("psp's second page lists %d events, want its oldest 2, a link to the newest and none older:\n%s", n, second)
	}
	if _, all := f.get(t, "audrey", "/console/provider-events"); !strings.Contains(all, "evt-stripe") {
		t.Error("the unfiltered page lacks stripe's event")
	}
	for _, bad := range []string{"0", "x", "-1"} {
		if status, _ := f.get(t, "audrey", "/console/provider-events?before="+bad); status != http.StatusBadRequest {
			t.Errorf("before=%s: %d, want 400", bad, status)
		}
	}
}

// An order's timeline shows a provider's event it recorded as not applied: the provider, the
// event's id and type, and why.
func TestTimelineShowsProviderEventsNotApplied(t *testing.T) {
	f := newFixture(t)
	id := f.paidOrder(t, "evt-late")
	for _, who := range []string{"alice", "audrey"} {
		status, body := f.get(t, who, "/console/orders/"+id)
		if status != http.StatusOK {
			t.Fatalf("the order, to %s: %d\n%s", who, status, body)
		}
		at := strings.Index(body, "evt-late")
		if at < 0 {
			t.Fatalf("the order's page, to %s, lacks the provider's event:\n%s", who, body)
		}
		row := body[strings.LastIndex(body[:at], "<tr"):]
		row = row[:strings.Index(row, "</tr>")]
		for _, want := range []string{"provider event unapplied", "not applied", "psp event <code>evt-late</code>", "<code>payment.failed</code>", ": no payment is in progress"} {
			if !strings.Contains(row, want) {
				t.Errorf("the unapplied event's line, to %s, lacks %q:\n%s", who, want, row)
			}
		}
	}
}
