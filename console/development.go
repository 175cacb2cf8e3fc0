package console

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

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

// developmentCaller is the caller of every request if the server is in development mode: the
// caller the API makes of any key there, asked for one that no one holds.
func (c *Console) developmentCaller() (access.Caller, bool) {
	if !c.svc.Development {
		return access.Caller{}, false
	}
	return c.svc.Authenticate(c.dev.noKey)
}

// developmentVisit is a request to the console of a server in development mode, or an
// error page if it names a host other than the loopback. A page of another site whose name
// resolves to this machine (DNS rebinding) names its own host, and could otherwise read the
// console's pages and their token: the API refuses those hosts in development mode too.
func (c *Console) developmentVisit(w http.ResponseWriter, r *http.Request, caller access.Caller) (*visit, bool) {
	if !access.LoopbackHost(r.Host) {
		c.fail(w, r, nil, fmt.Errorf("%w, not %q", errNotLoopback, r.Host))
		return nil, false
	}
	return &visit{caller: caller, csrf: c.dev.csrf, development: true}, true
}
