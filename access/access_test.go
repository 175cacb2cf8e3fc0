package access

import (
	"errors"
	"testing"
)

// What each role may do: a client reads and commands its own orders; an auditor reads every
// order and audits, never commands; an admin does all an auditor does and administers.
func TestWhatEachRoleMayDo(t *testing.T) {
	for _, tc := range []struct {
		roles                                                   Roles
		ownOrder, othersOrder, command, audit, administer, anyO bool
	}{
		{RoleClient, true, false, true, false, false, false},
		{RoleAuditor, true, true, false, true, false, true},
		{RoleAdmin, true, true, false, true, true, true},
		{RoleClient | RoleAdmin, true, true, true, true, true, true},
		{0, false, false, false, false, false, false},
	} {
		c := Caller{Principal: "shop-1", Roles: tc.roles}
		got := [...]bool{c.MayReadOrder("shop-1"), c.MayReadOrder("shop-2"), c.MayCommand(), c.MayAudit(), c.MayAdminister(), c.MayReadAnyOrder()}
		want := [...]bool{tc.ownOrder, tc.othersOrder, tc.command, tc.audit, tc.administer, tc.anyO}
		if got != want {
			t.Errorf("roles %q: may read own, others', command, audit, administer, read any = %v, want %v", tc.roles, got, want)
		}
	}
	c := Caller{Principal: "shop-1", Roles: RoleClient}
	if err := c.Need(c.MayAdminister(), "rebuild"); !errors.Is(err, ErrForbidden) {
		t.Errorf("Need of what a client may not do: %v", err)
	}
	if err := c.Need(c.MayCommand(), "command"); err != nil {
		t.Errorf("Need of what a client may do: %v", err)
	}
}

// Roles read and print as the keys file writes them.
func TestRolesRoundTrip(t *testing.T) {
	rs, err := ParseRoles("admin, client")
	if err != nil || rs != RoleAdmin|RoleClient || rs.String() != "client,admin" {
		t.Errorf("ParseRoles = %v (%q), %v", rs, rs, err)
	}
	if _, err := ParseRoles("root"); err == nil {
		t.Error("an unknown role read")
	}
}
