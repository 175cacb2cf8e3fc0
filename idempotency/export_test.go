package idempotency

import (
	"context"
	"time"
)

// EntryBytes is what remembering a completed key costs in memory.
func EntryBytes(stream, fingerprint string, out Outcome) int64 {
	r, _ := pack(fingerprint, time.Time{}, out)
	return r.size()
}

// Recall is the replay of principal's key from memory, for tests of the memory alone.
func (k *Keys) Recall(ctx context.Context, principal, key, fingerprint string) (*Outcome, bool, error) {
	return k.replay(ctx, StreamName(principal, key), fingerprint)
}

// SetKnownSlots sizes the table of claimed keys of the next Sweep.
func (k *Keys) SetKnownSlots(n int) { k.sweeper.slots = n }

// SweeperEntries returns how many keys the running sweeper holds in memory.
func (k *Keys) SweeperEntries() int {
	k.sweeper.mu.Lock()
	defer k.sweeper.mu.Unlock()
	n := 0
	for _, h := range k.sweeper.known {
		if h != 0 {
			n++
		}
	}
	return n
}
