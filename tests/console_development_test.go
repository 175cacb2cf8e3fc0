package tests

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The console in a real browser, without a key and with one: a server in development mode (no
// keys file) opens it as the principal of every request there, saying so, while a server with
// a keys file still asks for a key.
func TestConsoleSignsInByTheServersKeys(t *testing.T) {
	browser := newBrowser(t)
	dev := startServer(t, "")
	keyed := startServer(t, "", "--keys-file", accessKeysFile(t))
	t.Run("DevelopmentModeNeedsNoKey", func(t *testing.T) { developmentModeNeedsNoKey(t, newTab(t, browser), dev) })
	t.Run("AKeysFileAsksForOne", func(t *testing.T) { aKeysFileAsksForOne(t, newTab(t, browser), keyed) })
}

// developmentModeNeedsNoKey: /console/ shows the orders at once, with a notice that names the
// principal; the sign-in page leads there too; an admin's rebuild works from its page, whose
// form carries the token that a request without it is refused for.
func developmentModeNeedsNoKey(t *testing.T, ctx context.Context, s *server) {
	id, _ := s.create(t, "console-dev", "c-console-dev")
	run(t, ctx, "open the console", chromedp.Navigate(s.base+"/console/"))
	if list := text(t, ctx, "#orders tbody"); !strings.Contains(list, id) {
		t.Errorf("the orders in development mode lack %s:\n%s", id, list)
	}
	if got := text(t, ctx, "#development"); !strings.Contains(got, "Development mode: no API keys") || !strings.Contains(got, "local") {
		t.Errorf("the development mode's notice: %q", got)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#key, .signout").length`)); err != nil || n != 0 {
		t.Errorf("%d sign-in or sign-out forms in development mode (%v), want none", n, err)
	}
	run(t, ctx, "open the sign-in page", chromedp.Navigate(s.base+"/console/sign-in"))
	waitForPage(t, ctx, "the orders in place of the sign-in page", `location.pathname === "/console/orders"`)

	if status, _ := consoleRequest(t, s, "POST", "/console/admin/projections/orders/rebuild", "", url.Values{}); status != http.StatusForbidden {
		t.Errorf("a rebuild without the form's token: %d, want 403", status)
	}
	run(t, ctx, "rebuild the orders", chromedp.Navigate(s.base+"/console/admin/projections"),
		chromedp.Click(chromedp.CSS(`form[action="/console/admin/projections/orders/rebuild"] button`)))
	waitForPage(t, ctx, "the rebuilt generation", `[...document.querySelectorAll("#projections tbody tr")].some(r =>
		r.cells[0].textContent === "orders" && r.cells[1].textContent.trim() === "live" && r.cells[2].textContent === "2")`)
}

// aKeysFileAsksForOne: /console/ sends the browser to sign in, and nothing says development mode.
func aKeysFileAsksForOne(t *testing.T, ctx context.Context, s *server) {
	run(t, ctx, "open the console", chromedp.Navigate(s.base+"/console/"))
	if got := signInMessage(t, ctx); got != "Sign in to continue." {
		t.Errorf("the console with a keys file: %q, want the sign-in page", got)
	}
	if status, body := consoleRequest(t, s, "GET", "/console/orders", "", nil); status != http.StatusSeeOther || strings.Contains(body, "Development mode") {
		t.Errorf("the orders without a session, with a keys file: %d, want 303 to sign in\n%s", status, body)
	}
	signIn(t, ctx, s, audrey)
	if got := text(t, ctx, ".signout .who"); !strings.HasPrefix(got, "audrey") {
		t.Errorf("signed in as %q, want audrey", got)
	}
}
