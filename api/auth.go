package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acme/orders/access"
	"github.com/labstack/echo/v4"
)

// APIKey is one line of the keys file: a principal, the SHA-256 of one of its keys and the
// roles that key grants. The key itself is never stored.
type APIKey struct {
	Principal string
	Hash      [sha256.Size]byte
	Roles     access.Roles
}

// HashKey is the SHA-256 of an API key, as the keys file stores it.
func HashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// Line is k as a line of the keys file.
func (k APIKey) Line() string {
	return k.Principal + " " + hex.EncodeToString(k.Hash[:]) + " " + k.Roles.String()
}

// APIKeys are the keys a server accepts. Empty means development mode: every request is the
// principal "local" with every role.
type APIKeys []APIKey

// devPrincipal is the principal of every request in development mode.
const devPrincipal = "local"

// ParseAPIKeys reads a keys file. Each line is
//
//	<principal> <sha256-hex-of-key> [<role>[,<role>...]]
//
// with roles client, auditor and admin; without roles the key is a client's (the format of
// keys files written before roles existed). Blank lines and lines starting with # are skipped.
// A principal may have several keys, each with its own roles; a hash may appear only once.
func ParseAPIKeys(r io.Reader) (APIKeys, error) {
	var keys APIKeys
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, dup := seen[k.Hash]; dup {
			return nil, fmt.Errorf("line %d: the same key hash as line %d", n, first)
		}
		seen[k.Hash] = n
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

func parseKeyLine(line string) (APIKey, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 || len(fields) > 3 {
		return APIKey{}, errors.New("want '<principal> <sha256-hex-of-key> [role,...]'")
	}
	k := APIKey{Principal: fields[0], Roles: access.RoleClient}
	if err := access.ValidatePrincipal(k.Principal); err != nil {
		return APIKey{}, err
	}
	sum, err := hex.DecodeString(fields[1])
	if err != nil || len(sum) != sha256.Size {
		return APIKey{}, errors.New("the key hash is not 64 hex digits (see 'api keys hash')")
	}
	copy(k.Hash[:], sum)
	if len(fields) == 3 {
		if k.Roles, err = access.ParseRoles(fields[2]); err != nil {
			return APIKey{}, err
		}
	}
	return k, nil
}

// lookupHash finds the entry of a key by its hash. It compares the hash with every entry's in
// constant time and never stops early, so how long it takes tells nothing of which entry, if
// any, shares a prefix with it. (A map lookup by the hash would leak little, since a hash
// prefix does not lead to a key, but the scan costs nothing at the sizes of a keys file and
// leaves nothing to argue about.)
func (ks APIKeys) lookupHash(sum [sha256.Size]byte) (APIKey, bool) {
	found := -1
	for i := range ks {
		eq := subtle.ConstantTimeCompare(sum[:], ks[i].Hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return APIKey{}, false
	}
	return ks[found], true
}

// principal and roles are the caller of the request, as authenticate found it.
func principal(c echo.Context) string { return stateOf(c).Principal }

func roles(c echo.Context) access.Roles { return stateOf(c).roles }

// callerOf is the request's authenticated caller.
func callerOf(c echo.Context) access.Caller {
	return access.Caller{Principal: principal(c), Roles: roles(c)}
}

// ReplaceAPIKeys makes ks the keys accepted from the next request on, to rotate keys without a
// restart. It refuses an empty ks, and any ks on a server in development mode: neither
// authentication nor its absence may be switched while the server runs.
func (s *Server) ReplaceAPIKeys(ks APIKeys) error {
	switch {
	case len(s.APIKeys) == 0:
		return errors.New("a server in development mode has no keys to replace")
	case len(ks) == 0:
		return errors.New("no keys")
	}
	s.replaced.Store(&ks)
	return nil
}

// apiKeys returns the keys in use.
func (s *Server) apiKeys() APIKeys {
	if ks := s.replaced.Load(); ks != nil {
		return *ks
	}
	return s.APIKeys
}

// authenticate maps the bearer key to its principal and roles (401 if there is none), or, for
// a request without one that Dispatch sent, takes the caller Dispatch names; then it lets the
// request through only if the access table allows the route to one of the roles (403 if not).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// Development mode (no keys) takes a request without a key too; Authenticate decides.
		bearer, ok := bearerToken(c.Request().Header.Get("Authorization"))
		if caller, sent := dispatchedCaller(c); !ok && sent {
			return s.admit(c, caller, next)
		}
		dev := len(s.apiKeys()) == 0
		if !ok && !dev {
			return errUnauthorized
		}
		if dev && s.LoopbackHosts && !access.LoopbackHost(c.Request().Host) {
			return fmt.Errorf("%w: development mode answers requests to loopback names only, not %q", errForbidden, c.Request().Host)
		}
		caller, ok := s.Authenticate(bearer)
		if !ok {
			return errUnauthorized
		}
		return s.admit(c, caller, next)
	}
}

// admit makes caller the request's and lets it through if the access table allows the route to
// one of its roles (403 if not).
func (s *Server) admit(c echo.Context, caller access.Caller, next echo.HandlerFunc) error {
	r := stateOf(c)
	r.Principal, r.roles = caller.Principal, caller.Roles
	if err := s.authorize(c); err != nil {
		return err
	}
	return next(c)
}

// bearerToken is the token of an Authorization header of the Bearer scheme (RFC 6750), whose
// name is case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimLeft(token, " ")
	return token, strings.EqualFold(scheme, "Bearer") && token != ""
}
