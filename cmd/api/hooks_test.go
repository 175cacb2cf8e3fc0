//go:build !crashhooks

package main

import "testing"

// A release build has no way to kill itself, whatever its environment says.
func TestReleaseBuildHasNoCrashHooks(t *testing.T) {
	h := testHooks(func(string) string { return "any-key" })
	if h.AfterClaim != nil || h.AfterAppend != nil {
		t.Fatal("a release build took crash hooks from its environment")
	}
}
