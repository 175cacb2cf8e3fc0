package idempotency

import (
	"context"
)

// Recall is the replay of principal's key from memory, for tests of the memory alone.
func (k *Keys) Recall(ctx context.Context, principal, key, fingerprint string) (*Outcome, bool, error) {
	return k.replay(ctx, StreamName(principal, key), fingerprint)
}
