package console

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acme/orders/access"
)

// inDevelopment makes f's console that of a server without keys: every key is the principal
// "local" with every role, as api.Server.AuthenticateHash answers then.
func (f *fixture) inDevelopment() {
	f.c.svc.Development = true
	f.c.svc.Authenticate = func([sha256.Size]byte) (access.Caller, bool) {
		return access.Caller{Principal: "local", Roles: access.AllRoles}, true
	}
}

// send sends a request without a session cookie to the console, to host.
func (f *fixture) send(method, host, path string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
	r.Host = host
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, r)
	return w
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// In development mode the console opens without a key, says so, and has no sign-in or
// sign-out; its forms that change something still carry a token a request must send back.
func TestDevelopmentModeOpensWithoutAKey(t *testing.T) {
	f := newFixture(t)
	f.inDevelopment()
	w := f.send("GET", "127.0.0.1:8080", "/console/orders", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, "Development mode: no API keys") ||
		!strings.Contains(body, ">local<") || strings.Contains(body, "/console/sign-out") {
		t.Errorf("the orders in development mode: %d, want 200 with the notice and no sign-out\n%s", w.Code, body)
	}
	for _, path := range []string{"/console/sign-in", "/console/sign-in?m=required"} {
		if w := f.send("GET", "localhost:8080", path, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/orders" {
			t.Errorf("%s in development mode: %d to %q, want 303 to the orders", path, w.Code, w.Header().Get("Location"))
		}
	}

	w = f.send("GET", "[::1]:8080", "/console/admin/projections", nil)
	m := csrfField.FindStringSubmatch(w.Body.String())
	if w.Code != http.StatusOK || m == nil {
		t.Fatalf("the projections in development mode: %d, without a form's token\n%s", w.Code, w.Body.String())
	}
	rebuild := "/console/admin/projections/orders/rebuild"
	for _, token := range []string{"", "not-the-token"} {
		if w := f.send("POST", "127.0.0.1:8080", rebuild, url.Values{"csrf": {token}}); w.Code != http.StatusForbidden {
			t.Errorf("a rebuild with token %q: %d, want 403", token, w.Code)
		}
	}
	if w := f.send("POST", "127.0.0.1:8080", rebuild, url.Values{"csrf": {m[1]}}); w.Code != http.StatusSeeOther {
		t.Errorf("a rebuild with the page's token: %d, want 303\n%s", w.Code, w.Body.String())
	}
}

// In development mode the console answers requests to loopback names only, as the API does:
// a page of another site whose name resolves to this machine (DNS rebinding) reads nothing.
func TestDevelopmentModeAnswersLoopbackNamesOnly(t *testing.T) {
	f := newFixture(t)
	f.inDevelopment()
	for _, host := range []string{"evil.example", "evil.example:8080", "10.0.0.1:8080", "localhost.evil.example"} {
		w := f.send("GET", host, "/console/orders", nil)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "loopback names only") || csrfField.MatchString(w.Body.String()) {
			t.Errorf("the orders to host %q: %d, want 403 without a token\n%s", host, w.Code, w.Body.String())
		}
	}
}

// With keys, the console asks for one: no request is the principal of development mode.
func TestWithKeysTheConsoleAsksForAKey(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/console/orders", "/console/admin/projections"} {
		w := f.send("GET", "127.0.0.1:8080", path, nil)
		if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/console/sign-in") {
			t.Errorf("%s without a session: %d to %q, want 303 to sign in", path, w.Code, w.Header().Get("Location"))
		}
	}
	if w := f.send("GET", "127.0.0.1:8080", "/console/sign-in", nil); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "Development mode") {
		t.Errorf("the sign-in page with keys: %d\n%s", w.Code, w.Body.String())
	}
}
