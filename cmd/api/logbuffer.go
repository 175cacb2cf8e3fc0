package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logBuffer batches the server's log lines: written one by one, the access log and the key
// lifecycle would cost a write(2) each per request. It writes out what it holds every interval,
// whenever it fills, and on Close; a crash loses at most the last interval's lines.
type logBuffer struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newLogBuffer(w io.Writer, interval time.Duration) *logBuffer {
	b := &logBuffer{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.flush()
			case <-b.stop:
				return
			}
		}
	}()
	return b
}

// Write buffers p. A slog handler writes each record with one call, so a line never has
// another's bytes in it, and a flush never leaves half of it behind for long.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

func (b *logBuffer) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.w.Flush()
}

// Close writes out what is left and stops the flushing.
func (b *logBuffer) Close() error {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}
