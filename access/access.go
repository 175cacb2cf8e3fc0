// Package access says what a caller may do, in the domain's terms: read an order, command,
// audit, administer. The API's routes and the console's pages ask it alike.
package access

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/acme/orders/fault"
)

// ErrForbidden: the caller's roles do not allow what it asked.
var ErrForbidden = fault.New(fault.Forbidden, "", "forbidden")

// Roles is a set of roles. A principal may hold several.
type Roles uint8

// The roles.
const (
	// RoleClient issues commands and reads its own orders and idempotency keys.
	RoleClient Roles = 1 << iota
	// RoleAuditor reads any order, its history and its state; it never commands.
	RoleAuditor
	// RoleAdmin runs projections and reads metrics, and can do all an auditor can.
	RoleAdmin

	// AllRoles is what the principal of development mode holds.
	AllRoles = RoleClient | RoleAuditor | RoleAdmin
)

var roleNames = []struct {
	role Roles
	name string
}{{RoleClient, "client"}, {RoleAuditor, "auditor"}, {RoleAdmin, "admin"}}

// Has reports whether rs holds any of the roles in r.
func (rs Roles) Has(r Roles) bool { return rs&r != 0 }

// String lists the roles comma-separated, as the keys file does.
func (rs Roles) String() string {
	var names []string
	for _, r := range roleNames {
		if rs.Has(r.role) {
			names = append(names, r.name)
		}
	}
	return strings.Join(names, ",")
}

// ParseRoles reads a comma-separated list of role names.
func ParseRoles(s string) (Roles, error) {
	var rs Roles
	for name := range strings.SplitSeq(s, ",") {
		r, ok := roleNamed(strings.TrimSpace(name))
		if !ok {
			return 0, fmt.Errorf("unknown role %q (want client, auditor or admin)", name)
		}
		rs |= r
	}
	return rs, nil
}

func roleNamed(name string) (Roles, bool) {
	for _, r := range roleNames {
		if r.name == name {
			return r.role, true
		}
	}
	return 0, false
}

// Caller is an authenticated principal and the roles its key grants.
type Caller struct {
	Principal string
	Roles     Roles
}

// MayReadAnyOrder reports whether c reads every principal's orders: auditors and admins.
func (c Caller) MayReadAnyOrder() bool { return c.Roles.Has(RoleAuditor | RoleAdmin) }

// MayReadOrder reports whether c may read an order that owner created, and its history: its
// own, or any for an auditor or admin. To anyone else the order does not exist.
func (c Caller) MayReadOrder(owner string) bool {
	return c.MayReadAnyOrder() || c.Roles.Has(RoleClient) && owner == c.Principal
}

// MayCommand reports whether c may command orders (its own) and keep idempotency keys.
func (c Caller) MayCommand() bool { return c.Roles.Has(RoleClient) }

// MayAudit reports whether c may read the audit's views: an order's state at a past revision,
// its hash chain, reports, any principal's keys.
func (c Caller) MayAudit() bool { return c.Roles.Has(RoleAuditor | RoleAdmin) }

// MayAdminister reports whether c may run projections, verify the log and read metrics.
func (c Caller) MayAdminister() bool { return c.Roles.Has(RoleAdmin) }

// Need returns nil if may holds, else ErrForbidden saying what c may not do.
func (c Caller) Need(may bool, what string) error {
	if may {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s with the roles %s", ErrForbidden, c.Principal, what, c.Roles)
}

// ValidatePrincipal checks a principal's name, as an API key or a payment provider names it:
// printable ASCII without spaces, not starting with #, at most 128 characters. It is recorded
// in every event the principal causes.
func ValidatePrincipal(name string) error {
	if name == "" || len(name) > 128 || strings.HasPrefix(name, "#") {
		return fmt.Errorf("invalid principal %q: 1 to 128 characters, not starting with #", name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= 0x20 || name[i] > 0x7e {
			return fmt.Errorf("invalid principal %q: printable ASCII without spaces only", name)
		}
	}
	return nil
}

// LoopbackHost reports whether a request's Host names this machine's loopback: localhost (or a
// name under it), an address of 127.0.0.0/8, or ::1, with any port. In development mode (no
// API keys) the API and the console answer only such requests: a page of another site whose
// name resolves to this machine (DNS rebinding) names its own host, and the listener's loopback
// address is no guard against it.
func LoopbackHost(host string) bool {
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
