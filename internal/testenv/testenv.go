// Package testenv decides what a test does when a program it needs (Chromium, wrk,
// PostgreSQL's server) is not installed: on a developer's machine it skips, naming the command
// that installs the program; under CI, where ORDERS_CI is set, it fails, so that CI never
// passes with a part of the project untested.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// CI is the environment variable that .ci/run sets.
const CI = "ORDERS_CI"

// Missing skips or fails tb, as the package doc says, for a program that is not installed:
// what is missing and the command that installs it.
func Missing(tb testing.TB, what, install string) {
	tb.Helper()
	msg := fmt.Sprintf("%s is not installed; install it with: %s", what, install)
	if os.Getenv(CI) != "" {
		tb.Fatalf("%s (%s is set: CI runs every test)", msg, CI)
	}
	tb.Skip(msg)
}

// LookPath returns the path of the program name, or skips or fails tb as Missing does.
func LookPath(tb testing.TB, name, install string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name, install)
	}
	return path
}
