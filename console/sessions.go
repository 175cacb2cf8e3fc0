package console

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"time"
)

// session is a signed-in browser. It keeps the hash of the key it signed in with, never the
// key, and asks the API for the key's caller on every request.
type session struct {
	id        string
	keyHash   [sha256.Size]byte
	principal string
	csrf      string // the token every state-changing form of the session carries
	expires   time.Time
	elem      *list.Element // in sessions.order
	mine      *list.Element // in sessions.byPrincipal[principal]
}

// sessions is the table of signed-in browsers, bounded twice in count: a principal holds at
// most perPrincipal sessions (its new one ends its own oldest), and the table at most max (a
// new one ends the oldest of all, which only as many principals as max/perPrincipal can
// reach). So no principal's sign-ins end another's sessions. Every session lasts the same ttl,
// so the oldest expires first. Sign-ins of one key are limited to signInBurst at once, and one
// more each signInEvery after.
type sessions struct {
	mu           sync.Mutex
	byID         map[string]*session
	order        *list.List            // of *session, oldest first
	byPrincipal  map[string]*list.List // of each principal's *session, oldest first
	signIns      map[[sha256.Size]byte]signIns
	max          int
	perPrincipal int
	ttl          time.Duration
	now          func() time.Time
}

// signIns are a key's recent sign-ins: n of them counted from since, one forgiven each
// signInEvery.
type signIns struct {
	since time.Time
	n     int
}

// The sign-ins of one key: a burst of signInBurst, then one each signInEvery.
const (
	signInBurst = 10
	signInEvery = 6 * time.Second
)

func newSessions(max, perPrincipal int, ttl time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, order: list.New(), byPrincipal: map[string]*list.List{},
		signIns: map[[sha256.Size]byte]signIns{}, max: max, perPrincipal: min(perPrincipal, max), ttl: ttl, now: time.Now}
}

// start opens a session of principal for the key's hash, or returns nil if the key signed in
// more often than it may: retry after the returned wait.
func (t *sessions) start(keyHash [sha256.Size]byte, principal string) (*session, time.Duration) {
	s := &session{id: rand.Text(), keyHash: keyHash, principal: principal, csrf: rand.Text()}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if wait := t.signIn(keyHash, now); wait > 0 {
		return nil, wait
	}
	s.expires = now.Add(t.ttl)
	mine := t.byPrincipal[principal]
	if mine == nil {
		mine = list.New()
		t.byPrincipal[principal] = mine
	}
	for mine.Len() >= t.perPrincipal {
		t.drop(mine.Front().Value.(*session))
	}
	for t.order.Len() >= t.max {
		t.drop(t.order.Front().Value.(*session))
	}
	s.elem, s.mine = t.order.PushBack(s), mine.PushBack(s)
	t.byID[s.id] = s
	return s, 0
}

// signIn counts a sign-in of the key at now, or returns how long it must wait for one. The
// table of counts holds only keys the API accepted, and forgets a key once it is forgiven.
func (t *sessions) signIn(keyHash [sha256.Size]byte, now time.Time) time.Duration {
	c := t.signIns[keyHash]
	if forgiven := int(now.Sub(c.since) / signInEvery); forgiven > 0 {
		c.n = max(0, c.n-forgiven)
		c.since = c.since.Add(time.Duration(forgiven) * signInEvery)
	}
	if c.n == 0 {
		c.since = now
	}
	if c.n >= signInBurst {
		t.signIns[keyHash] = c
		return c.since.Add(signInEvery).Sub(now)
	}
	c.n++
	t.signIns[keyHash] = c
	for k, o := range t.signIns { // at most one forgotten per sign-in: the table stays small
		if k != keyHash && now.Sub(o.since) >= time.Duration(o.n)*signInEvery {
			delete(t.signIns, k)
			break
		}
	}
	return 0
}

// lookup returns the live session id, or why there is none: expired (it was there, and its
// time is up; it is dropped) or unknown (never was, signed out, pushed out, or the process
// restarted).
func (t *sessions) lookup(id string) (s *session, expired bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s = t.byID[id]
	if s == nil {
		return nil, false
	}
	if !t.now().Before(s.expires) {
		t.drop(s)
		return nil, true
	}
	return s, false
}

// end drops the session id, if there is one.
func (t *sessions) end(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byID[id]; s != nil {
		t.drop(s)
	}
}

func (t *sessions) drop(s *session) {
	delete(t.byID, s.id)
	t.order.Remove(s.elem)
	mine := t.byPrincipal[s.principal]
	mine.Remove(s.mine)
	if mine.Len() == 0 {
		delete(t.byPrincipal, s.principal)
	}
}
