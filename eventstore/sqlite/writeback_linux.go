package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// canWriteBack: Linux starts the writing of a file's dirty pages without waiting for it.
const canWriteBack = true

// startWriting asks the kernel to start writing f's dirty pages to the disk, and returns
// without waiting for them (sync_file_range(2) with SYNC_FILE_RANGE_WRITE alone). It makes
// nothing durable: the syncs of SQLite still do that.
func startWriting(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
