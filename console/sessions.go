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
	id      string
	keyHash [sha256.Size]byte
	csrf    string // the token every state-changing form of the session carries
	expires time.Time
	elem    *list.Element // in sessions.order
}

// sessions is the table of signed-in browsers, bounded in count: when it is full, signing in
// ends the oldest session. Every session lasts the same ttl, so the oldest expires first.
type sessions struct {
	mu    sync.Mutex
	byID  map[string]*session
	order *list.List // of *session, oldest first
	max   int
	ttl   time.Duration
	now   func() time.Time
}

func newSessions(max int, ttl time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, order: list.New(), max: max, ttl: ttl, now: time.Now}
}

// start opens a session for the key's hash.
func (t *sessions) start(keyHash [sha256.Size]byte) *session {
	s := &session{id: rand.Text(), keyHash: keyHash, csrf: rand.Text()}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.expires = t.now().Add(t.ttl)
	for t.order.Len() >= t.max {
		t.drop(t.order.Front().Value.(*session))
	}
	s.elem = t.order.PushBack(s)
	t.byID[s.id] = s
	return s
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
}
