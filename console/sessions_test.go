package console

import (
	"testing"
	"time"

	"github.com/acme/orders/api"
)

// The table holds at most max sessions, ending the oldest first, and a session ends at its
// time: the lookup then tells that it expired, once.
func TestSessionsAreBoundedAndExpire(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	table := newSessions(2, 2, 8*time.Hour)
	table.now = func() time.Time { return now }
	start := func(key string) *session {
		s, _ := table.start(api.HashKey(key), key)
		return s
	}
	a, b, c := start("a"), start("b"), start("c")
	if s, expired := table.lookup(a.id); s != nil || expired {
		t.Errorf("the oldest session outlived a full table: %v, expired %v", s, expired)
	}
	for _, s := range []*session{b, c} {
		if got, _ := table.lookup(s.id); got != s {
			t.Errorf("session %s was dropped", s.id)
		}
	}
	if b.csrf == "" || b.csrf == c.csrf || b.id == c.id {
		t.Errorf("sessions share ids or tokens: %q %q, %q %q", b.id, c.id, b.csrf, c.csrf)
	}

	now = now.Add(8*time.Hour - time.Second)
	if got, _ := table.lookup(b.id); got != b {
		t.Fatal("a session ended before its time")
	}
	now = now.Add(time.Second)
	if s, expired := table.lookup(b.id); s != nil || !expired {
		t.Errorf("at its time, a session is %v, expired %v; want expired", s, expired)
	}
	if s, expired := table.lookup(b.id); s != nil || expired {
		t.Errorf("an expired session is told expired twice")
	}
	table.end(c.id)
	if s, _ := table.lookup(c.id); s != nil || len(table.byID) != 0 || table.order.Len() != 0 {
		t.Errorf("after end: %v, %d sessions, %d in order", s, len(table.byID), table.order.Len())
	}
}

// A principal's sessions are bounded apart: its signing in past its bound ends its own oldest
// session, never another principal's, and a key signs in at most signInBurst times at once,
// then once each signInEvery.
func TestSessionsArePerPrincipalAndSignInsLimited(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	table := newSessions(100, 2, 8*time.Hour)
	table.now = func() time.Time { return now }
	admin, _ := table.start(api.HashKey("admin-key"), "adam")
	var mine []*session
	for i := range signInBurst {
		s, wait := table.start(api.HashKey("client-key"), "bob")
		if s == nil {
			t.Fatalf("sign-in %d refused (wait %v) within the burst", i, wait)
		}
		mine = append(mine, s)
	}
	if s, wait := table.start(api.HashKey("client-key"), "bob"); s != nil || wait <= 0 || wait > signInEvery {
		t.Fatalf("a sign-in past the burst: %v, wait %v; want refused for up to %v", s, wait, signInEvery)
	}
	if got, _ := table.lookup(admin.id); got != admin {
		t.Error("a client's sign-ins ended the admin's session")
	}
	for i, s := range mine {
		if got, _ := table.lookup(s.id); (got != nil) != (i >= len(mine)-2) {
			t.Errorf("the client's session %d is live %v; want its latest two alone", i, got != nil)
		}
	}
	now = now.Add(signInEvery)
	if s, _ := table.start(api.HashKey("client-key"), "bob"); s == nil {
		t.Error("a sign-in a while after the burst was refused")
	}
	if n := len(table.byID); n != 3 {
		t.Errorf("%d sessions; want the admin's and the client's two", n)
	}
}
