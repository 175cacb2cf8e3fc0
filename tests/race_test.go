//go:build race

package tests

// raceEnabled reports whether this test binary was built with the race detector; the server
// binary under test is then built with it too.
const raceEnabled = true
