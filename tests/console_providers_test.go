package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The console's provider events page in a real browser: the payment providers' events that
// were not applied, which an auditor lists, filters and follows to an order's timeline, and a
// client neither sees in its menu nor opens.
func TestConsoleProviderEvents(t *testing.T) {
	browser := newBrowser(t)
	s := startWithProviders(t)
	s.deliverOK(t, psp, succeeded("evt-console-1", "pay-nobody", 2000), "unapplied") // no such payment: the provider log
	paid := s.payingOrder(t, "pay-console-late")
	s.deliverOK(t, psp, succeeded("evt-console-paid", "pay-console-late", orderTotal), "applied")
	s.deliverOK(t, psp, failed("evt-console-late", "pay-console-late"), "unapplied") // too late: on the order
	t.Run("AuditorListsThem", func(t *testing.T) { auditorListsProviderEvents(t, newTab(t, browser), s, paid) })
	t.Run("ClientIsRefused", func(t *testing.T) { clientIsRefusedProviderEvents(t, newTab(t, browser), s) })
}

// auditorListsProviderEvents: the auditor opens the page from the menu, sees both events with
// their reasons, filters by provider, and follows the order's link to its timeline, where the
// event recorded on the order says what the provider reported and why it was not applied.
func auditorListsProviderEvents(t *testing.T, ctx context.Context, s *server, paid string) {
	signIn(t, ctx, s, audrey)
	run(t, ctx, "open the provider events", chromedp.Click(chromedp.CSS(`nav a[href="/console/provider-events"]`)))
	list := text(t, ctx, "#provider-events tbody")
	for _, want := range []string{"evt-console-1", `no order of alice started payment "pay-nobody"`, "evt-console-late", paid, "psp"} {
		if !strings.Contains(list, want) {
			t.Errorf("the provider events lack %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "evt-console-paid") {
		t.Errorf("the provider events list one that was applied:\n%s", list)
	}
	screenshot(t, ctx, "console-provider-events")

	run(t, ctx, "filter by another provider",
		chromedp.SetValue(chromedp.CSS("#f-provider"), "stripe"),
		chromedp.Click(chromedp.CSS("form.filters button")))
	waitForPage(t, ctx, "the filtered list", `location.search.includes("provider=stripe")`)
	if got := text(t, ctx, "#provider-events tbody"); !strings.Contains(got, "No provider events of stripe") {
		t.Errorf("filtered by stripe: %q; want none", got)
	}
	run(t, ctx, "filter by psp", chromedp.SetValue(chromedp.CSS("#f-provider"), "psp"),
		chromedp.Click(chromedp.CSS("form.filters button")))
	waitForPage(t, ctx, "the list of psp", `location.search.includes("provider=psp")`)
	run(t, ctx, "open the order", chromedp.Click(chromedp.CSS(`#provider-events a[href="/console/orders/`+paid+`"]`)))
	waitForPage(t, ctx, "the order's timeline", `document.querySelector("#timeline") !== null`)
	timeline := text(t, ctx, "#timeline")
	for _, want := range []string{"provider event unapplied", "not applied", "psp event evt-console-late"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the order's timeline lacks %q:\n%s", want, timeline)
		}
	}
}

// clientIsRefusedProviderEvents: a client has no link to the page, and is refused it.
func clientIsRefusedProviderEvents(t *testing.T, ctx context.Context, s *server) {
	signIn(t, ctx, s, alice)
	linked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('a[href="/console/provider-events"]') !== null`))
	if err != nil {
		t.Fatal(err)
	}
	if linked {
		t.Error("a client's menu links the provider events")
	}
	run(t, ctx, "open the provider events", chromedp.Navigate(s.base+"/console/provider-events"))
	if got := text(t, ctx, "h1"); got != "Forbidden" {
		t.Errorf("the provider events, to a client: %q; want Forbidden", got)
	}
	if main := text(t, ctx, "main"); strings.Contains(main, "evt-console") {
		t.Errorf("the refusal shows an event:\n%s", main)
	}
	browser := consoleBrowser(t)
	if status := consoleSignIn(t, s, browser, alice); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	res, err := browser.Get(s.url("/console/provider-events"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("the provider events, to a client: %d; want 403", res.StatusCode)
	}
}
