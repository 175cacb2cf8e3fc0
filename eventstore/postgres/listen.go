package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// relistenWait is how long the listener waits before it connects again after losing its
// connection. Subscriptions poll meanwhile (see pollInterval).
const relistenWait = time.Second

// listen keeps a connection of its own, outside the pool, that LISTENs to notifyChannel, and
// wakes the subscriptions at each notification, until the store closes. After a lost
// connection it wakes them too, as a notification may have been lost with it, and connects
// again.
func (s *Store) listen(cfg *pgx.ConnConfig) {
	defer close(s.listened)
	for {
		s.listenOnce(cfg)
		s.wake()
		t := time.NewTimer(relistenWait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
	}
}

// listenOnce connects, listens and wakes the subscriptions at each notification until the
// connection fails or the store closes.
func (s *Store) listenOnce(cfg *pgx.ConnConfig) {
	conn, err := pgx.ConnectConfig(s.ctx, cfg)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(s.ctx))
	if _, err := conn.Exec(s.ctx, "LISTEN "+notifyChannel); err != nil {
		return
	}
	// Commits between the last wake-up and the LISTEN sent no notification this connection
	// receives.
	s.wake()
	for {
		n, err := conn.WaitForNotification(s.ctx)
		if err != nil {
			return
		}
		if n.Payload != s.id { // the writer woke the subscriptions of its own commits
			s.wake()
		}
	}
}
