//go:build crashhooks

package main

import (
	"os"
	"syscall"

	"github.com/acme/orders/api"
)

// testHooks lets the end-to-end tests kill the process at the moments that matter, in a binary
// built with -tags crashhooks (tests/main_test.go builds it so); a release build has none:
// API_TEST_CRASH_AFTER_CLAIM and API_TEST_CRASH_AFTER_APPEND name the Idempotency-Key whose
// request dies there.
func testHooks(getenv func(string) string) api.Hooks {
	crash := func(key string) func(string) {
		if key == "" {
			return nil
		}
		return func(k string) {
			if k == key {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never return into the request
			}
		}
	}
	return api.Hooks{
		AfterClaim:  crash(getenv("API_TEST_CRASH_AFTER_CLAIM")),
		AfterAppend: crash(getenv("API_TEST_CRASH_AFTER_APPEND")),
	}
}
