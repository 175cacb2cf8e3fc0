//go:build crashhooks

package main

import (
	"os"
	"syscall"
	"time"

	"github.com/acme/orders/api"
)

// testHooks lets the end-to-end tests kill the process at the moments that matter, in a binary
// built with -tags crashhooks (tests/main_test.go builds it so); a release build has none:
// API_TEST_CRASH_AFTER_CLAIM, API_TEST_CRASH_AFTER_APPEND and API_TEST_CRASH_AFTER_ANSWER name
// the Idempotency-Key whose request dies there (after the answer: once it has had 200 ms to
// leave, before the outcome is recorded).
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
	hooks := api.Hooks{
		AfterClaim:  crash(getenv("API_TEST_CRASH_AFTER_CLAIM")),
		AfterAppend: crash(getenv("API_TEST_CRASH_AFTER_APPEND")),
	}
	if key := getenv("API_TEST_CRASH_AFTER_ANSWER"); key != "" {
		answered := crash(key)
		hooks.AfterAnswer = func(k string) {
			if k == key {
				time.Sleep(200 * time.Millisecond) // for the answer to leave the process
				answered(k)
			}
		}
	}
	return hooks
}
