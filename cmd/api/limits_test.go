package main

import "testing"

// The default of --max-connections leaves the store its file descriptors and stays bounded
// however high the open-file limit is.
func TestConnectionsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{1024, 1024 - connectionReserve},
		{4096, 4096 - connectionReserve},
		{20000, connectionCap},
		{1 << 20, connectionCap},
		{256, 128},
		{1, 1},
	} {
		if got := connectionsFor(tc.nofile); got != tc.want {
			t.Errorf("connectionsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}
