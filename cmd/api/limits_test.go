package main

import "testing"

// The default of --max-connections leaves the store and the webhook deliveries their file
// descriptors and stays bounded however high the open-file limit is.
func TestConnectionsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile, outgoing uint64
		want             int
	}{
		{1024, 0, 1024 - connectionReserve},
		{4096, 0, 4096 - connectionReserve},
		{2048, 512, 2048 - connectionReserve - 512},
		{20000, 512, connectionCap},
		{1 << 20, 512, connectionCap},
		{256, 0, 128},
		{1024, 512, 512},
		{1, 0, 1},
	} {
		if got := connectionsFor(tc.nofile, tc.outgoing); got != tc.want {
			t.Errorf("connectionsFor(%d, %d) = %d, want %d", tc.nofile, tc.outgoing, got, tc.want)
		}
	}
}
