package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/tests/load"
)

// Each measure of two alternated builds is the median of each build's rounds, whatever their
// order, and B's median over A's; a measure a build lacks, or has at 0, has no ratio.
func TestCompareTakesMediansByBuild(t *testing.T) {
	round := func(build string, n int, creates float64, p99 time.Duration, errors uint64) Round {
		f := Figures{Creates: &Creates{}, OpenLoop: &OpenLoop{Rates: []OpenRate{{Rate: 1000, Server: RateWindow{P99: p99, Errors: errors}}}}}
		f.Creates.Server.Commands = load.Stats{Commands: int(creates), Elapsed: time.Second}
		return Round{Build: build, Round: n, Figures: f}
	}
	rounds := []Round{
		round("A", 1, 120, 40*time.Millisecond, 0), round("B", 1, 150, 20*time.Millisecond, 0),
		round("A", 2, 100, 60*time.Millisecond, 0), round("B", 2, 130, 30*time.Millisecond, 2),
		round("A", 3, 110, 50*time.Millisecond, 0), round("B", 3, 140, 10*time.Millisecond, 0),
	}
	got := map[string]Compared{}
	for _, c := range compare(rounds) {
		got[c.Name] = c
	}
	creates := got["creates: creates/s"]
	if creates.MedianA != 110 || creates.MedianB != 140 || creates.Ratio != 140.0/110 || !slices.Equal(creates.A, []float64{120, 100, 110}) {
		t.Errorf("creates/s: %+v; want medians 110 and 140, B/A 1.27, A's rounds in their order", creates)
	}
	p99 := got["open loop 1000/s: p99"]
	if p99.MedianA != float64(50*time.Millisecond) || p99.MedianB != float64(20*time.Millisecond) || p99.Ratio != 0.4 {
		t.Errorf("open loop p99: %+v; want 50ms and 20ms, B/A 0.4", p99)
	}
	if e := got["open loop 1000/s: errors"]; e.MedianA != 0 || e.MedianB != 0 || e.Ratio != 0 {
		t.Errorf("errors: %+v; want medians 0, no ratio", e)
	}
	if _, ok := got["lifecycles: commands/s"]; ok {
		t.Errorf("a measure of lifecycles that did not run")
	}
}

func TestMedianOf(t *testing.T) {
	v := []float64{3, 1, 2, 10}
	if m := medianOf(v); m != 2.5 {
		t.Errorf("median of %v = %v, want 2.5", v, m)
	}
	if !slices.Equal(v, []float64{3, 1, 2, 10}) {
		t.Errorf("medianOf reordered its argument: %v", v)
	}
	if m := medianOf(v[:3]); m != 2 {
		t.Errorf("median of %v = %v, want 2", v[:3], m)
	}
	if m := medianOf(nil); m != 0 {
		t.Errorf("median of none = %v, want 0", m)
	}
}

// Two builds each start on a fresh data directory, and are compared over a bounded count of
// rounds; a third build has nothing to be compared with.
func TestAlternationOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bin", "a", "--bin", "b", "--bin", "c"}, "--bin"},
		{[]string{"--bin", "a", "--bin", "b", "--rounds", "0"}, "--rounds"},
		{[]string{"--bin", "a", "--bin", "b", "--rounds", "21"}, "--rounds"},
		{[]string{"--bin", "a", "--bin", "b", "--url", "http://127.0.0.1:1"}, "--url"},
		{[]string{"--bin", "a", "--bin", "b", "--data", "d"}, "--data"},
		{[]string{"--no-lifecycles", "--webhooks", "2"}, "--no-lifecycles"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append([]string{"run", "--no-baseline"}, c.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run %v: %v; want it refused naming %s", c.args, err, c.want)
		}
	}
}

func TestReportAlternation(t *testing.T) {
	alt := Alternation{Config: runCmd{Bin: []string{"old", "new"}, Rounds: 2}, OK: true, Measures: []Compared{
		{Name: "creates: p99", Unit: unitTime, A: []float64{4e7, 6e7}, B: []float64{2e7, 3e7}, MedianA: 5e7, MedianB: 2.5e7, Ratio: 0.5},
		{Name: "creates: disk writes per create", Unit: unitBytes, A: []float64{3000}, B: []float64{0}, MedianA: 3000},
	}}
	var b bytes.Buffer
	reportAlternation(&b, alt)
	for _, want := range []string{"A = old, B = new: 2 rounds", "50ms", "25ms", "0.500", "40ms 60ms", "3000 B", "verdict: OK"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
