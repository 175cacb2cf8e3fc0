package idempotency

// EntryBytes is what remembering a completed key costs in memory.
func EntryBytes(stream, fingerprint string, out Outcome) int64 {
	return remembered{fingerprint: fingerprint, outcome: out}.size(stream)
}

// SetKnownSlots sizes the table of claimed keys of the next Sweep.
func (k *Keys) SetKnownSlots(n int) { k.knownSlots = n }

// SweeperEntries returns how many keys the running sweeper holds in memory.
func (k *Keys) SweeperEntries() int {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	n := 0
	if k.sweep != nil {
		for _, h := range k.sweep.known {
			if h != 0 {
				n++
			}
		}
	}
	return n
}
