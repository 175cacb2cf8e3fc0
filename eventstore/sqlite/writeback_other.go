//go:build !linux

package sqlite

import "os"

// canWriteBack: this system has no way to start writing a file's pages without waiting for
// them, and SQLite's syncs alone write them.
const canWriteBack = false

func startWriting(*os.File) error { return nil }
