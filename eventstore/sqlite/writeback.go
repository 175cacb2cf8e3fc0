package sqlite

import (
	"os"
	"sync"
	"time"
)

// DefaultWriteback is how often a database's files are handed to the disk when a Config or a
// DBConfig leaves it at 0.
const DefaultWriteback = 50 * time.Millisecond

// writeback starts the disk's writing of the pages of some files every interval, without
// waiting for it (startWriteback). A checkpoint writes tens of megabytes into a database file
// and then syncs it; until the sync, the kernel leaves most of them in memory, and the sync
// then sends them all at once. The store's commits sync its WAL on the same disk, and each
// one that comes during such a burst waits behind it. Started every 50 ms, the writing goes
// out in small pieces, and the syncs find little left to do: in the load harness's paired
// windows, the worst create p99 of a run went from 120–143 ms to at most 65 ms
// (docs/benchmarks.md). RocksDB's bytes_per_sync and PostgreSQL's checkpoint_flush_after do
// the same for the same reason.
//
// The database file is opened once, read-only, and kept open until Close, even should another
// file take its name: closing a descriptor of a file drops every POSIX lock this process holds
// on it, SQLite's among them, so Close must come after the connections to the database are
// closed. A WAL, on which SQLite takes no lock, is followed: the last connection to close
// removes it, and the next one to write creates another.
type writeback struct {
	db   string
	wals []string
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startWriteback starts the writeback of the database file db and of the WALs every interval,
// and none if interval is negative or the system cannot start a writeback without waiting for
// it. A file that does not exist yet (a WAL before the first write) is looked for again at
// each turn.
func startWriteback(interval time.Duration, db string, wals ...string) *writeback {
	w := &writeback{db: db, wals: wals, stop: make(chan struct{}), done: make(chan struct{})}
	if interval == 0 {
		interval = DefaultWriteback
	}
	if interval < 0 || !canWriteBack {
		close(w.done)
		return w
	}
	go w.run(interval)
	return w
}

func (w *writeback) run(interval time.Duration) {
	defer close(w.done)
	files := make([]*os.File, 1+len(w.wals)) // the database file's, then the WALs'
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-w.stop:
			return
		}
		if files[0] == nil {
			files[0], _ = os.Open(w.db) // nil until it exists
		}
		for i, path := range w.wals {
			files[1+i] = current(files[1+i], path)
		}
		for _, f := range files {
			if f != nil {
				startWriting(f) // an error here is the next sync's to report
			}
		}
	}
}

// current returns the WAL at path: f while it is still that file or nothing is there, else
// the file now there, if any.
func current(f *os.File, path string) *os.File {
	if f != nil {
		now, err := os.Stat(path)
		if err != nil {
			return f
		}
		if held, err := f.Stat(); err == nil && os.SameFile(now, held) {
			return f
		}
		f.Close()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	return f
}

// Close stops the writeback and closes its files: call it once the database's connections
// are closed (see writeback).
func (w *writeback) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
