//go:build !crashhooks

package main

import "github.com/acme/orders/api"

// testHooks is none in a release build: only a binary built with -tags crashhooks can be told
// to kill itself (see hooks_crash.go).
func testHooks(func(string) string) api.Hooks { return api.Hooks{} }
