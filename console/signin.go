package console

import (
	"crypto/rand"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/api"
)

const (
	sessionCookie = "console_session"
	// signInCookie carries the sign-in form's CSRF token (double submit): no session exists
	// yet to hold it.
	signInCookie = "console_sign_in"
)

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, under /console/ only, and
// Secure when the request came over TLS or the console is told that its users reach it over
// TLS (Config.SecureCookies: behind a proxy that ends TLS, the request itself is plain HTTP).
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/console/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secureCookies || r.TLS != nil})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	c.setCookie(w, r, name, "", -1)
}

type signInData struct {
	Token   string
	Message string
	Problem bool // the message says what went wrong, rather than what happened
}

// signInPage shows the sign-in form; in development mode, where there is no key to give, it
// sends the browser to the orders, which it sees without one.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, dev := c.developmentCaller(); dev {
		http.Redirect(w, r, "/console/orders", http.StatusSeeOther)
		return
	}
	c.showSignIn(w, r, http.StatusOK, signInMessages[r.URL.Query().Get("m")], r.URL.Query().Get("m") != "signed-out")
}

func (c *Console) showSignIn(w http.ResponseWriter, r *http.Request, status int, message string, problem bool) {
	token := rand.Text()
	c.setCookie(w, r, signInCookie, token, 3600)
	c.render(w, r, status, "sign-in", "Sign in", nil, signInData{Token: token, Message: message, Problem: problem && message != ""})
}

// signIn exchanges the form's key for a session. The key is hashed at once and the hash kept
// in the session; the browser gets only the session's id.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if _, dev := c.developmentCaller(); dev {
		http.Redirect(w, r, "/console/orders", http.StatusSeeOther)
		return
	}
	cookie, err := r.Cookie(signInCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), cookie.Value) {
		c.showSignIn(w, r, http.StatusForbidden, "The sign-in form had expired. Try again.", true)
		return
	}
	hash := api.HashKey(r.PostFormValue("key"))
	caller, ok := c.svc.Authenticate(hash)
	if !ok || r.PostFormValue("key") == "" {
		c.showSignIn(w, r, http.StatusUnauthorized, "That key is not accepted. Check it and try again.", true)
		return
	}
	api.NoteCaller(r, caller)
	s, wait := c.sessions.start(hash, caller.Principal)
	if s == nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second).Seconds())+1))
		c.showSignIn(w, r, http.StatusTooManyRequests, "This key signed in too often just now. Wait a few seconds and try again.", true)
		return
	}
	c.clearCookie(w, r, signInCookie)
	c.setCookie(w, r, sessionCookie, s.id, int(c.sessions.ttl.Seconds()))
	http.Redirect(w, r, "/console/orders", http.StatusSeeOther)
}

// signOut ends the visit's session. In development mode there is none to end: every request
// is signed in.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, v *visit) {
	if v.development {
		http.Redirect(w, r, "/console/orders", http.StatusSeeOther)
		return
	}
	c.sessions.end(v.session.id)
	c.clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/console/sign-in?m=signed-out", http.StatusSeeOther)
}
