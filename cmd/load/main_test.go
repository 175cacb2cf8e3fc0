package main

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// --help prints the flags and stops: it does not go on to run the load.
func TestHelpDoesNotRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"run", "--help", "--url", "http://127.0.0.1:1"}, &stdout, &stderr); err != nil {
		t.Fatalf("run --help: %v", err)
	}
	if !strings.Contains(stdout.String(), "--clients") {
		t.Errorf("run --help printed %q; want the flags", stdout.String())
	}
	if strings.Contains(stderr.String(), "load:") {
		t.Errorf("run --help went on to run the load: %q", stderr.String())
	}
}

// A replay phase starts once the target is idle: awaitQuiet waits while the process works,
// up to its bound, and returns soon once it stops.
func TestAwaitQuietWaitsForAnIdleProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for !stop.Load() {
		}
	}()
	if waited := awaitQuiet(t.Context(), os.Getpid(), time.Second); waited < time.Second {
		t.Errorf("a busy process counted as idle after %v", waited)
	}
	stop.Store(true)
	<-spun
	if waited := awaitQuiet(t.Context(), os.Getpid(), 20*time.Second); waited >= 20*time.Second {
		t.Errorf("an idle process never counted as idle within %v", waited)
	}
}
