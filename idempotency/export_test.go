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
