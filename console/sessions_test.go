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
	table := newSessions(2, 8*time.Hour)
	table.now = func() time.Time { return now }
	a := table.start(api.HashKey("a"))
	b := table.start(api.HashKey("b"))
	c := table.start(api.HashKey("c"))
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
