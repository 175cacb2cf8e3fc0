package eventstoretest

import (
	"fmt"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
)

// ForgetsDeletedStreams checks a store that keeps a deleted stream's row for keep only (the
// embedded store's and PostgreSQL's KeepDeleted), which the caller opened as s, empty: a stream
// recreated within keep goes on from its last revision, as on KurrentDB; once keep has passed,
// the deletes after it forget the rows of the streams deleted before, up to 64 each, and a
// stream recreated under a forgotten name starts at revision 0.
func ForgetsDeletedStreams(t *testing.T, s eventstore.Store, keep time.Duration) {
	t.Helper()
	ctx := t.Context()
	cycle := func(stream string, events int) {
		t.Helper()
		if _, err := s.Append(ctx, stream, eventstore.NoStream, NewEvents(events)...); err != nil {
			t.Fatalf("append %s: %v", stream, err)
		}
		if err := s.DeleteStream(ctx, stream, eventstore.StreamExists); err != nil {
			t.Fatalf("delete %s: %v", stream, err)
		}
	}
	recreate := func(stream string, want uint64) {
		t.Helper()
		res, err := s.Append(ctx, stream, eventstore.NoStream, NewEvents(1)...)
		if err != nil || res.Revision != want {
			t.Errorf("recreate %s: revision %d, %v; want revision %d", stream, res.Revision, err, want)
		}
	}
	const old = 100
	for i := range old {
		cycle(fmt.Sprintf("old-%d", i), 3)
	}
	cycle("recent", 2)
	recreate("recent", 2) // within keep: its revisions go on
	time.Sleep(keep + 10*time.Millisecond)
	for i := range 2 {
		cycle(fmt.Sprintf("later-%d", i), 1) // each forgets up to 64 rows deleted before keep
	}
	for _, stream := range []string{"old-0", fmt.Sprintf("old-%d", old-1)} {
		recreate(stream, 0)
	}
	recreate("later-0", 1) // deleted within keep: still known
}

// ForgetsExpiredStreams checks a store that forgets expired streams (see
// eventstore.StreamAppend.MaxAge) and keeps a deleted stream's row for keep only, which the
// caller opened as s, empty: a stream that expired counts as deleted from then on, so once
// keep has passed, the writes after it forget the rows of 100 streams that expired, and a
// stream recreated under a forgotten name starts at revision 0. Expired streams so leave
// nothing behind for good, though no request meets them again.
func ForgetsExpiredStreams(t *testing.T, s eventstore.Store, keep time.Duration) {
	t.Helper()
	ctx := t.Context()
	const n = 100
	appends := make([]eventstore.StreamAppend, n)
	for i := range appends {
		appends[i] = eventstore.StreamAppend{Stream: fmt.Sprintf("expiring-%d", i), Expected: eventstore.NoStream, Events: NewEvents(1), MaxAge: shortAge}
	}
	if _, err := eventstore.Write(ctx, s, appends...); err != nil {
		t.Fatalf("write %d streams with a maximum age: %v", n, err)
	}
	time.Sleep(shortAge + keep + 10*time.Millisecond)
	for i := range 4 {
		MustAppend(t, s, fmt.Sprintf("later-%d", i), eventstore.NoStream, NewEvents(1)...)
		time.Sleep(10 * time.Millisecond)
	}
	for _, stream := range []string{appends[0].Stream, appends[n-1].Stream} {
		res, err := s.Append(ctx, stream, eventstore.NoStream, NewEvents(1)...)
		if err != nil || res.Revision != 0 {
			t.Errorf("recreate %s: revision %d, %v; want revision 0", stream, res.Revision, err)
		}
	}
}
