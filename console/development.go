package console

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/acme/orders/access"
)

// errNotLoopback: a request to the console of a server in development mode named a host
// other than the loopback.
var errNotLoopback = errors.New("development mode (no API keys) answers requests to loopback names only (localhost, 127.0.0.1, ::1)")

// development is the console of a server in development mode (no keys file), where every
// request is the principal of development mode with every role, as every API request is: no
// sign-in, no session. Its forms carry one token made at the start, which only a page of the
// console can read.
type development struct {
	// noKey is a random hash, which no key has: only a server without keys accepts it.
	noKey [sha256.Size]byte
	csrf  string
}

func newDevelopment() development {
	var d development
	rand.Read(d.noKey[:])
	d.csrf = rand.Text()
	return d
}

// developmentCaller is the caller of every request if the server is in development mode,
// which the API tells by accepting a key that no one holds. It asks on every request, as a
// session does, rather than once at the start, so that the console is never open without a key
// on a server that has keys.
func (c *Console) developmentCaller() (access.Caller, bool) {
	return c.svc.Authenticate(c.dev.noKey)
}

// developmentVisit is a request to the console of a server in development mode, or an
// error page if it names a host other than the loopback. A page of another site whose name
// resolves to this machine (DNS rebinding) names its own host, and could otherwise read the
// console's pages and their token: the API refuses those hosts in development mode too.
func (c *Console) developmentVisit(w http.ResponseWriter, r *http.Request, caller access.Caller) (*visit, bool) {
	if !loopbackHost(r.Host) {
		c.fail(w, r, nil, fmt.Errorf("%w, not %q", errNotLoopback, r.Host))
		return nil, false
	}
	return &visit{caller: caller, csrf: c.dev.csrf, development: true}, true
}

// loopbackHost reports whether a request's Host names this machine's loopback: localhost (or a
// name under it), an address of 127.0.0.0/8, or ::1, with any port: the API's own check in
// development mode, which requests to the console do not pass through.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
