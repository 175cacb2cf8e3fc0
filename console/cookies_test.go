package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A console cookie is Secure when the request came over TLS, or always when the console is
// told that a proxy in front of it ends TLS; it is HttpOnly, SameSite=Strict and under
// /console/ in every case.
func TestCookiesAreSecureBehindATLSProxy(t *testing.T) {
	for _, tc := range []struct {
		name          string
		secureCookies bool
		overTLS       bool
		want          bool
	}{
		{"plain HTTP", false, false, false},
		{"over TLS", false, true, true},
		{"behind a proxy that ends TLS", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Console{secureCookies: tc.secureCookies}
			r := httptest.NewRequest("GET", "/console/sign-in", nil)
			if tc.overTLS {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			c.setCookie(w, r, sessionCookie, "s", 60)
			cookies := w.Result().Cookies()
			if len(cookies) != 1 {
				t.Fatalf("%d cookies set, want 1", len(cookies))
			}
			got := cookies[0]
			if got.Secure != tc.want || !got.HttpOnly || got.Path != "/console/" || got.SameSite != http.SameSiteStrictMode {
				t.Errorf("cookie %+v: Secure %v, want %v, HttpOnly, path /console/, SameSite=Strict", got, got.Secure, tc.want)
			}
		})
	}
}
