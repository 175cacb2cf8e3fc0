package kurrent

import "testing"

func TestCurrentRevision(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want uint64
		ok   bool
	}{
		{"wrong expected version: expecting 'no_stream' but got '5'", 5, true},
		{"[ErrorCodeWrongExpectedVersion] an append request failed the optimistic concurrency on the server: " +
			"wrong expected version: expecting 'no_stream' but got '18446744073709551614'", 18446744073709551614, true},
		{"wrong expected version: expecting '3' but got '0'", 0, true},
		{"wrong expected version: expecting 'no_stream' but got 'no_stream'", 0, false},
		{"wrong expected version: expecting 'no_stream' but got '18446744073709551616'", 0, false}, // past uint64
		{"wrong expected version: expecting 'no_stream' but got '-1'", 0, false},
		{"expected version mismatch: stream is at 5", 0, false},
		{"", 0, false},
	} {
		got, ok := currentRevision(tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("currentRevision(%q) = %d, %v; want %d, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}
