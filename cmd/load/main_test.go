package main

import (
	"bytes"
	"strings"
	"testing"
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
