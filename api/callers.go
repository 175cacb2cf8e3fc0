package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"github.com/acme/orders/access"
	"github.com/acme/orders/projections"
)

// NoteCaller records the caller of a request that another front end (the console) authenticated
// by its own means, so that the request's log line and its metrics name the principal as those
// of the API's own requests do. It does nothing for a request that did not pass the API's
// handler.
func NoteCaller(r *http.Request, c access.Caller) {
	if st := requestOf(r.Context()); st != nil {
		st.Principal, st.roles = c.Principal, c.Roles
	}
}

// Authenticate returns the caller of an API key, and false if no key in use is key. In
// development mode every key is the principal "local" with every role, as every request is.
func (s *Server) Authenticate(key string) (access.Caller, bool) {
	if len(s.apiKeys()) == 0 {
		return access.Caller{Principal: devPrincipal, Roles: access.AllRoles}, true // no key to hash it for
	}
	return s.AuthenticateHash(HashKey(key))
}

// AuthenticateHash is Authenticate by the key's hash (HashKey), for a front end that keeps
// the hash of the key it was given, never the key, and asks again on every request, so that
// a key taken out of the keys file (ReplaceAPIKeys) stops working there too.
func (s *Server) AuthenticateHash(sum [sha256.Size]byte) (access.Caller, bool) {
	keys := s.apiKeys()
	if len(keys) == 0 {
		return access.Caller{Principal: devPrincipal, Roles: access.AllRoles}, true
	}
	k, ok := keys.lookupHash(sum)
	if !ok {
		return access.Caller{}, false
	}
	return access.Caller{Principal: k.Principal, Roles: k.Roles}, true
}

// IsNotFound reports whether err is the API's not found (404): no such order, key or thing.
func IsNotFound(err error) bool {
	return errors.Is(err, errOrderNotFound) || errors.Is(err, errNotFound)
}

// StatusOf is the HTTP status and the detail the API answers err with, by the one mapping of
// errors to problems (problemOf); the detail of a 5xx is "internal error".
func StatusOf(err error) (int, string) {
	p := problemOf(err)
	return p.Status, p.Detail
}

// CaughtUp waits, within the bound of an API read, until projection has applied every event
// up to the head of the log as it is now: what a read of the API without minPosition waits for.
func (s *Server) CaughtUp(ctx context.Context, projection string) error {
	head, err := s.Feed.Head(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	if err := s.Projections.WaitFor(ctx, projection, head); err != nil {
		if errors.Is(err, projections.ErrBehind) {
			return fmt.Errorf("%w: %s has not reached position %d", errBehind, projection, head.Commit)
		}
		return err
	}
	return nil
}
