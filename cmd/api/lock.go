package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockData takes the data directory for this server until release: a second server on it
// would run its projections into the same read models and, on the embedded store, its own
// writer into the same event file. The lock is the kernel's (flock), so a killed server leaves
// none behind. Commands that only read (audit) do not take it.
func lockData(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "serve.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another api serve", dir)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
