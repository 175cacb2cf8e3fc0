package command

// Settle remembers the order after the keyed command that returned r, as the key's claim does
// once its outcome is kept (KeyClaim.OnKept): for tests that hold the key themselves.
func (r Result) Settle() {
	if r.settle != nil {
		r.settle()
	}
}
