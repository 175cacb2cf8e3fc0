package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/tests/load"
)

// The create targets of paired windows are judged on medians: of an odd count the middle
// pair's, of an even one the mean of the middle two, whatever order the pairs came in.
func TestPairMedians(t *testing.T) {
	pair := func(creates, cpu float64, p99 time.Duration) CreatePair {
		var p CreatePair
		p.Ratios = CreateRatios{Creates: creates, CPUPerCreate: cpu}
		p.Server.Commands.Latency = load.Latency{P99: p99}
		return p
	}
	odd := []CreatePair{pair(0.4, 3.5, 70*time.Millisecond), pair(0.3, 2.9, 40*time.Millisecond), pair(0.35, 3.1, 90*time.Millisecond)}
	if m := pairMedians(odd); m.Ratios.Creates != 0.35 || m.Ratios.CPUPerCreate != 3.1 || m.P99 != 70*time.Millisecond {
		t.Errorf("medians of three pairs: %+v; want 0.35, 3.1×, 70ms", m)
	}
	even := append(odd, pair(0.5, 2.5, 50*time.Millisecond))
	if m := pairMedians(even); m.Ratios.Creates != 0.375 || m.Ratios.CPUPerCreate != 3.0 || m.P99 != 60*time.Millisecond {
		t.Errorf("medians of four pairs: %+v; want 0.375, 3.0×, 60ms", m)
	}
	if m := pairMedians(nil); m != (PairMedians{}) {
		t.Errorf("medians of no pairs: %+v; want zeros", m)
	}
}

// --create-pairs is bounded, and needs the keyed creates it pairs.
func TestCreatePairsOptionIsBounded(t *testing.T) {
	for _, args := range [][]string{{"--create-pairs", "21"}, {"--create-pairs", "-1"}, {"--create-pairs", "2", "--no-creates"}} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append([]string{"run", "--url", "http://127.0.0.1:1", "--no-baseline"}, args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--create-pairs") {
			t.Errorf("run %v: %v; want --create-pairs refused", args, err)
		}
	}
}
