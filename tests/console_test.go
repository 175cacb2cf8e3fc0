package tests

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/internal/testenv"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// consoleScreenshots, if set, is the directory the console tests write their screenshots to
// (docs/ holds the README's: regenerateScreenshots)
var consoleScreenshots = flag.String("console-screenshots", "", "directory to write the console's screenshots to")

// browserTimeout bounds the whole run of the browser tests.
const browserTimeout = 3 * time.Minute

// The console in a real browser: one headless chromium, a tab with cookies of its own for each
// part; one server with alice's and bob's orders for the parts that read them, then a copy of
// its store with one byte flipped; and a server whose sessions last two seconds.
func TestConsole(t *testing.T) {
	browser := newBrowser(t)
	keys := accessKeysFile(t)
	s := startServer(t, "", "--keys-file", keys)
	ids, bobID := consoleOrders(t, s)
	const ttl = 2 * time.Second
	short := startServer(t, "", "--keys-file", keys, "--console-session-ttl", ttl.String())
	t.Run("AuditorFollowsAnOrder", func(t *testing.T) { auditorFollowsAnOrder(t, newTab(t, browser), s, ids, bobID) })
	t.Run("ClientSeesOnlyItsOwnOrders", func(t *testing.T) { clientSeesOnlyItsOwnOrders(t, newTab(t, browser), s, ids, bobID) })
	t.Run("SessionsEnd", func(t *testing.T) { sessionsEnd(t, newTab(t, browser), short, ttl) })
	t.Run("AdminRebuildsAProjection", func(t *testing.T) { adminRebuildsAProjection(t, newTab(t, browser), s) })
	s.current().stop(t)
	t.Run("ShowsABrokenChain", func(t *testing.T) { showsABrokenChain(t, newTab(t, browser), s, keys, ids) })
}

// newTab opens a tab in a browser context of its own (cookies, storage), closed with the test.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// newBrowser starts a headless Debian chromium for the test, or skips or fails the test if
// there is none (internal/testenv).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := testenv.LookPath(t, "chromium", "apt-get install chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(func() { cancel(); cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs the browser actions and fails the test on the first error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// bearerKey is the API key in a caller's Authorization header.
func bearerKey(caller []string) string { return strings.TrimPrefix(caller[1], "Bearer ") }

// signIn signs in at the console with the caller's key and waits for the orders page.
func signIn(t *testing.T, ctx context.Context, s *server, caller []string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(s.base+"/console/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), bearerKey(caller)),
		chromedp.Submit(chromedp.CSS("#key")),
		chromedp.WaitVisible(chromedp.CSS("#orders")))
}

// signInMessage is the message the sign-in page shows at the moment.
func signInMessage(t *testing.T, ctx context.Context) string {
	t.Helper()
	msg := text(t, ctx, "#message")
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "/console/sign-in") {
		t.Fatalf("at %s, want the sign-in page", loc)
	}
	return msg
}

// text reads the visible text of the element sel. The element found may belong to a page the
// browser is just leaving (a form submitted, a link followed): then it is gone before its text
// is read, and the element of the page that follows is read instead.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var err error
	for range 3 {
		run(t, ctx, "find "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
		var s string
		if s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel))); err == nil {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("read %s: %v", sel, err)
	return ""
}

// consoleOrders makes alice's and bob's orders: alice's third order is paid, then charged
// again (a duplicate charge), so its third event (revision 2) starts the payment.
func consoleOrders(t *testing.T, s *server) (aliceIDs []string, bobID string) {
	t.Helper()
	for i := range 3 {
		key := fmt.Sprint("console-", i)
		aliceIDs = append(aliceIDs, createdID(t, s.as(t, alice, "POST", "/v1/orders", key, orderFor(fmt.Sprint("c-console-", i)))))
	}
	paid := aliceIDs[2]
	s.ok(t, alice, 200, "POST", "/v1/orders/"+paid+"/payments", "console-start", map[string]any{"paymentId": "pay-console", "amount": orderTotal})
	s.ok(t, alice, 200, "POST", "/v1/orders/"+paid+"/payments/pay-console/confirm", "console-confirm", map[string]any{"amount": orderTotal})
	s.ok(t, alice, 422, "POST", "/v1/orders/"+paid+"/payments/pay-again/confirm", "console-again", map[string]any{"amount": orderTotal})
	bobID = createdID(t, s.as(t, bob, "POST", "/v1/orders", "console-bob", orderFor("c-console-bob")))
	return aliceIDs, bobID
}

// waitFor waits until the page's JavaScript expression is true.
func waitForPage(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	// A navigation under way ends the poll of the page it leaves (its target or its context is
	// gone): poll the next page, until the deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			page, perr := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("wait for %s: %v; the page at %s (%v):\n%s", what, err, loc, perr, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// auditorFollowsAnOrder: an auditor signs in, filters the orders, opens one, sees its chain and its duplicate
// charge, chooses its third event and sees the state then and what the event changed.
func auditorFollowsAnOrder(t *testing.T, ctx context.Context, s *server, ids []string, bobID string) {
	signIn(t, ctx, s, audrey)
	list := text(t, ctx, "#orders tbody")
	for _, id := range append(ids, bobID) {
		if !strings.Contains(list, id) {
			t.Errorf("the auditor's list lacks order %s:\n%s", id, list)
		}
	}
	screenshot(t, ctx, "console-orders")

	run(t, ctx, "filter by customer and status",
		chromedp.SetValue(chromedp.CSS("#f-customer"), "c-console-2"),
		chromedp.SetValue(chromedp.CSS("#f-status"), "paid"),
		chromedp.Click(chromedp.CSS("form.filters button")))
	waitForPage(t, ctx, "the filtered list", `location.search.includes("customer=c-console-2")`)
	list = text(t, ctx, "#orders tbody")
	if !strings.Contains(list, ids[2]) || strings.Contains(list, ids[0]) || strings.Contains(list, bobID) || !strings.Contains(list, "duplicate charge") {
		t.Fatalf("filtered by customer c-console-2 and status paid:\n%s", list)
	}

	run(t, ctx, "open the order", chromedp.Click(chromedp.CSS(`#orders a[href="/console/orders/`+ids[2]+`"]`)))
	if got := text(t, ctx, "#chain-status"); !strings.HasPrefix(got, "Intact") {
		t.Errorf("chain status %q, want intact", got)
	}
	if got := text(t, ctx, "#duplicates"); !strings.Contains(got, "Refund 2000 EUR") {
		t.Errorf("duplicate charges: %q, want the amount to refund", got)
	}
	if got := text(t, ctx, "#event-2"); !strings.Contains(got, "payment started") || !strings.Contains(got, "alice") || !strings.Contains(got, "console-start") {
		t.Errorf("the third event's row: %q", got)
	}
	checkLocalTime(t, ctx, "#event-0 time")

	run(t, ctx, "choose the third event", chromedp.Click(chromedp.CSS("#event-2 a")))
	waitForPage(t, ctx, "the state as of the third event", `location.search.includes("event=2") && document.querySelector("#diff") !== null`)
	diff := text(t, ctx, "#diff")
	for _, want := range []string{"status", `"created"`, `"paying"`, "paymentId", `"pay-console"`, "updatedAt"} {
		if !strings.Contains(diff, want) {
			t.Errorf("the third event's diff lacks %q:\n%s", want, diff)
		}
	}
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil {
		t.Fatal(err)
	}
	if focused != "selected" {
		t.Errorf("the focus is on %q, want the chosen event's state", focused)
	}
	screenshot(t, ctx, "console-order")
	checkPhoneWidth(t, ctx)

	session := checkCookies(t, ctx, s, 8*time.Hour)
	checkExport(t, s, session, ids[2], 5)
	run(t, ctx, "open the key of the payment", chromedp.Click(chromedp.CSS("#event-2 td:nth-child(5) a")))
	if got := text(t, ctx, "main section"); !strings.Contains(got, "POST /v1/orders/"+ids[2]+"/payments") || !strings.Contains(got, "answered 200") {
		t.Errorf("the key page: %q", got)
	}
}

// checkPhoneWidth checks that the page fits a phone's width (390 px) without scrolling sideways.
func checkPhoneWidth(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "a phone's width", chromedp.EmulateViewport(390, 844))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.documentElement.scrollWidth <= window.innerWidth`,
		chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		width, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		t.Errorf("at a phone's width (390 px) the page is %d px wide: %v", width, err)
	}
	run(t, ctx, "a desktop's width", chromedp.ResetViewport())
}

// checkLocalTime checks that the script shows the time sel in the browser's zone, its UTC
// form in the title.
func checkLocalTime(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	shown := text(t, ctx, sel)
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), "title"))
	if err != nil {
		t.Fatal(err)
	}
	title := attr.Value
	if !strings.HasSuffix(title, " UTC") || strings.Contains(shown, "UTC") || shown == "" {
		t.Errorf("a time shows %q with title %q; want the local time, UTC on hover", shown, title)
	}
}

// checkCookies checks the console's cookies: the session's is HttpOnly, SameSite=Strict,
// under /console/ only, not Secure over plain HTTP, lasts ttl, and no cookie holds a key.
// It returns the session's id.
func checkCookies(t *testing.T, ctx context.Context, s *server, ttl time.Duration) string {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{s.base + "/console/"}})
	if err != nil {
		t.Fatalf("read the cookies: %v", err)
	}
	cookies := res.Cookies
	var session *network.Cookie
	for _, c := range cookies {
		if strings.Contains(c.Value, "access-secret") {
			t.Errorf("cookie %s holds an API key", c.Name)
		}
		if c.Name == "console_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no session cookie among %d cookies", len(cookies))
	}
	left := time.Until(time.Unix(int64(session.Expires), 0))
	if !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/console/" || session.Secure ||
		left > ttl || left < ttl-time.Minute {
		t.Errorf("session cookie: HttpOnly %v, SameSite %v, Path %q, Secure %v, expires in %v; want HttpOnly, Strict, /console/, not Secure over HTTP, %v",
			session.HTTPOnly, session.SameSite, session.Path, session.Secure, left.Round(time.Second), ttl)
	}
	return session.Value
}

// checkExport downloads the order's JSONL export with the session and counts its lines.
func checkExport(t *testing.T, s *server, session, id string, events int) {
	t.Helper()
	status, body := consoleRequest(t, s, "GET", "/console/orders/"+id+"/events.jsonl", session, nil)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if status != http.StatusOK || len(lines) != events || !strings.Contains(lines[0], `"type":"order.created.v2"`) || !strings.Contains(lines[0], `"stream":"order-`+id+`"`) {
		t.Errorf("export: %d, %d lines, want 200 and %d:\n%s", status, len(lines), events, body)
	}
}

// consoleRequest sends a request to the console with the session cookie, as a browser would
// but without following redirects (the console's pages are HTML, outside the API's contract
// that the test client checks answers against).
func consoleRequest(t *testing.T, s *server, method, path, session string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.AddCookie(&http.Cookie{Name: "console_session", Value: session})
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// clientSeesOnlyItsOwnOrders: a client sees its own orders only; another's order is a friendly 404, and the admin pages
// are not its to see.
func clientSeesOnlyItsOwnOrders(t *testing.T, ctx context.Context, s *server, ids []string, bobID string) {
	signIn(t, ctx, s, bob)
	list := text(t, ctx, "#orders tbody")
	if !strings.Contains(list, bobID) {
		t.Errorf("bob's list lacks his order %s:\n%s", bobID, list)
	}
	for _, id := range ids {
		if strings.Contains(list, id) {
			t.Errorf("bob's list shows alice's order %s", id)
		}
	}
	run(t, ctx, "open alice's order", chromedp.Navigate(s.base+"/console/orders/"+ids[0]))
	if got := text(t, ctx, "h1"); got != "Order not found" {
		t.Errorf("alice's order, to bob: %q; want the not-found page", got)
	}
	run(t, ctx, "open a made-up order", chromedp.Navigate(s.base+"/console/orders/not-an-order"))
	if got := text(t, ctx, "h1"); got != "Order not found" {
		t.Errorf("an unknown order: %q; want the not-found page", got)
	}
	run(t, ctx, "open his order", chromedp.Navigate(s.base+"/console/orders/"+bobID))
	if got := text(t, ctx, "#chain"); !strings.Contains(got, "auditors and admins") {
		t.Errorf("the chain, to a client: %q", got)
	}
	run(t, ctx, "open the projections", chromedp.Navigate(s.base+"/console/admin/projections"))
	if got := text(t, ctx, "h1"); got != "Forbidden" {
		t.Errorf("the projections, to a client: %q", got)
	}
}

// copyDir copies the files of a stopped server's data directory.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// showsABrokenChain: a copy of a store with one byte of one event flipped shows that order's
// chain broken at that event, and an admin's verify of the whole log finds it.
func showsABrokenChain(t *testing.T, ctx context.Context, stopped *server, keys string, ids []string) {
	dir := copyDir(t, stopped.dir)
	db, err := sqlite.OpenDB(filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// 'pay-console' becomes 'pay-consolf': one byte of the payment-started event's data.
	res, err := db.Exec(`UPDATE events SET data = CAST(replace(CAST(data AS TEXT), 'pay-console', 'pay-consolf') AS BLOB)
		WHERE type = 'order.payment-started.v1'`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("flip a byte: %v, %d rows", err, n)
	}
	db.Close()

	c := startServer(t, dir, "--keys-file", keys)
	signIn(t, ctx, c, audrey)
	run(t, ctx, "open the order", chromedp.Navigate(c.base+"/console/orders/"+ids[2]))
	if got := text(t, ctx, "#chain-status"); !strings.HasPrefix(got, "Broken at revision 2 (order.payment-started.v1)") {
		t.Errorf("chain status %q, want broken at revision 2, the payment-started event", got)
	}
	run(t, ctx, "open an untouched order", chromedp.Navigate(c.base+"/console/orders/"+ids[0]))
	if got := text(t, ctx, "#chain-status"); !strings.HasPrefix(got, "Intact") {
		t.Errorf("an untouched order's chain: %q", got)
	}

	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#key")))
	signIn(t, ctx, c, adam)
	run(t, ctx, "verify the log", chromedp.Navigate(c.base+"/console/admin/verify"),
		chromedp.WaitVisible(chromedp.CSS("main form button")), chromedp.Click(chromedp.CSS("main form button")))
	waitForPage(t, ctx, "the verify's result", `document.querySelector("#verify-result") !== null`)
	if got := text(t, ctx, "#findings"); !strings.Contains(got, "tampered") || !strings.Contains(got, ids[2]) {
		t.Errorf("the verify's findings: %q; want the order's tampered event", got)
	}
}

// adminRebuildsAProjection: an admin rebuilds the orders read model and the page follows the
// rebuild until its new generation is live.
func adminRebuildsAProjection(t *testing.T, ctx context.Context, s *server) {
	signIn(t, ctx, s, adam)
	run(t, ctx, "rebuild the orders", chromedp.Navigate(s.base+"/console/admin/projections"),
		chromedp.Click(chromedp.CSS(`form[action="/console/admin/projections/orders/rebuild"] button`)))
	// The page follows the rebuild until the new generation is live.
	waitForPage(t, ctx, "the rebuilt generation", `[...document.querySelectorAll("#projections tbody tr")].some(r =>
		r.cells[0].textContent === "orders" && r.cells[1].textContent.trim() === "live" && r.cells[2].textContent === "2")`)
}

// sessionsEnd: sign-out and an expired session go back to the sign-in page with a plain message, as does a
// bad key; a form without the session's CSRF token is refused.
func sessionsEnd(t *testing.T, ctx context.Context, s *server, ttl time.Duration) {
	run(t, ctx, "sign in with a bad key", chromedp.Navigate(s.base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), "not-a-key"), chromedp.Submit(chromedp.CSS("#key")))
	if got := signInMessage(t, ctx); !strings.Contains(got, "not accepted") {
		t.Errorf("a bad key: %q", got)
	}

	signIn(t, ctx, s, audrey)
	session := checkCookies(t, ctx, s, ttl)
	if status, _ := consoleRequest(t, s, "POST", "/console/sign-out", session, url.Values{}); status != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token: %d, want 403", status)
	}
	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS(".signout button")))
	if got := signInMessage(t, ctx); got != "You have signed out." {
		t.Errorf("after sign-out: %q", got)
	}
	if status, _ := consoleRequest(t, s, "GET", "/console/orders", session, nil); status != http.StatusSeeOther {
		t.Errorf("the signed-out session: %d, want 303 to sign in", status)
	}
	run(t, ctx, "open the orders", chromedp.Navigate(s.base+"/console/orders"))
	if got := signInMessage(t, ctx); got != "Sign in to continue." {
		t.Errorf("the orders after sign-out: %q", got)
	}

	signIn(t, ctx, s, audrey)
	time.Sleep(ttl + 200*time.Millisecond)
	run(t, ctx, "open the orders after the session's time", chromedp.Navigate(s.base+"/console/orders"))
	if got := signInMessage(t, ctx); got == "" {
		t.Errorf("an expired session: no message")
	}
}

// An order's page lists its duplicate charges a page of 100 at a time, as the API's answer
// does, with their count and a way to the next page; the state as of a charge says what it
// changed by the API's count and total, not by every charge.
func TestConsolePagesDuplicateCharges(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := createdID(t, s.as(t, alice, "POST", "/v1/orders", "charged", orderFor("c-charged")))
	s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/payments", "charged-start", map[string]any{"paymentId": "pay-0", "amount": orderTotal})
	s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/payments/pay-0/confirm", "charged-confirm", map[string]any{"amount": orderTotal})
	const charges = 150
	for i := 1; i <= charges; i++ {
		s.ok(t, alice, 422, "POST", fmt.Sprintf("/v1/orders/%s/payments/pay-%d/confirm", id, i), fmt.Sprint("again-", i), map[string]any{"amount": orderTotal})
	}
	browser := consoleBrowser(t)
	if status := consoleSignIn(t, s, browser, audrey); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	page := func(query string) string {
		t.Helper()
		res, err := browser.Get(s.url("/console/orders/" + id + query))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", query, res.StatusCode, body)
		}
		return string(body)
	}
	shown := func(body string) int {
		dup := body[strings.Index(body, `id="duplicates"`):]
		return strings.Count(dup[:strings.Index(dup, "</section>")], "<li>")
	}
	first := page("")
	if n := shown(first); n != 100 || !strings.Contains(first, fmt.Sprint(charges, " payments")) || !strings.Contains(first, "?charges=100#duplicates") {
		t.Errorf("the first page shows %d charges, or lacks their count or the next page's link", n)
	}
	second := page("?charges=100")
	if n := shown(second); n != charges-100 || !strings.Contains(second, "?charges=0#duplicates") || strings.Contains(second, `rel="next"`) {
		t.Errorf("the second page shows %d charges, or lacks the previous page's link", n)
	}
	last := page(fmt.Sprintf("?event=%d", 3+charges))
	diff := last[strings.Index(last, `id="diff"`):]
	diff = diff[:strings.Index(diff, "</table>")]
	if !strings.Contains(diff, "duplicateChargeCount") || !strings.Contains(diff, fmt.Sprint(charges)) || strings.Count(diff, "paymentId") > 0 {
		t.Errorf("the last charge's changes:\n%s", diff)
	}
	if len(last) > 200<<10 {
		t.Errorf("the page as of the last charge is %d bytes", len(last))
	}
}
