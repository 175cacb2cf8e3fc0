package load

import (
	"bytes"
	"regexp"
)

// panicked matches what a Go server writes when it panics: the runtime's "panic: " at the
// start of a line, or net/http's report of a handler that panicked.
var panicked = regexp.MustCompile(`(?m)^panic: |http: panic serving`)

// Panicked reports whether a server's stderr shows a panic. A log line that merely contains
// the word does not count: a random request id can spell it.
func Panicked(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("panic")) && panicked.Match(stderr)
}
