package tests

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// A client that signs in at the console 10,000 times, as fast as it can, ends none of an
// admin's sessions: a principal's sessions are bounded apart from the others', and a key signs
// in a few times at once, then is answered 429 with Retry-After.
func TestConsoleSignInsOfOneClientLeaveAnAdminSignedIn(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	admin := consoleBrowser(t)
	if status := consoleSignIn(t, s, admin, adam); status != http.StatusSeeOther {
		t.Fatalf("the admin's sign-in: %d; want 303 to the orders", status)
	}
	client := consoleBrowser(t)
	answered := map[int]int{}
	for range 10_000 {
		answered[consoleSignIn(t, s, client, bob)]++
	}
	t.Logf("the client's sign-ins, by answer: %v", answered)
	if answered[http.StatusSeeOther] == 0 || answered[http.StatusTooManyRequests] == 0 || len(answered) != 2 {
		t.Errorf("the client's sign-ins, by answer: %v; want some signed in, the rest 429", answered)
	}
	res, err := admin.Get(s.url("/console/orders"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("the admin's orders page after the client's sign-ins: %d (%s); want 200", res.StatusCode, res.Header.Get("Location"))
	}
}

// consoleBrowser is an HTTP client with cookies that follows no redirect.
func consoleBrowser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// consoleSignIn signs caller in at the console with browser, reading the sign-in form first
// unless browser holds its token, and returns the answer's status.
func consoleSignIn(t *testing.T, s *server, browser *http.Client, caller []string) int {
	t.Helper()
	u, _ := url.Parse(s.url("/console/sign-in"))
	token := ""
	for _, c := range browser.Jar.Cookies(u) {
		if c.Name == "console_sign_in" {
			token = c.Value
		}
	}
	if token == "" {
		res, err := browser.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return consoleSignIn(t, s, browser, caller)
	}
	form := url.Values{"key": {strings.TrimPrefix(caller[1], "Bearer ")}, "csrf": {token}}
	res, err := browser.PostForm(u.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
