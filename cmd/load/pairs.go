package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/acme/orders/tests/load"
)

// maxCreatePairs bounds --create-pairs: each pair is two windows of --duration.
const maxCreatePairs = 20

// CreatePair is one paired window of keyed creates (--create-pairs): the yardstick's, then the
// server's right after it, so that both meet the machine as it is at that moment.
type CreatePair struct {
	Yardstick Phase        `json:"yardstick"`
	Server    Phase        `json:"server"`
	Ratios    CreateRatios `json:"ratios"` // the server's figures, times the yardstick's
	// Verify is the check of the server's creates against their ledger; none with wrk.
	Verify *load.Report `json:"verify,omitempty"`
}

// PairMedians are the medians of the paired windows: what the create targets are judged on
// when there are pairs.
type PairMedians struct {
	Ratios CreateRatios  `json:"ratios"`
	P99    time.Duration `json:"p99Ns"` // of the server's creates
}

// createPairs runs n paired windows of keyed creates against a yardstick of their own, kept
// running beside the server (an idle target takes no processor time), and the server at url.
func (cmd *runCmd) createPairs(ctx context.Context, dir, url string, pid int, say func(string, ...any)) ([]CreatePair, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ydir, err := os.MkdirTemp(dir, "yardstick-pairs-") // fresh for each build of --bin A --bin B
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ydir)
	y, err := startChild(ctx, ydir, "yardstick", self, "serve-yardstick", "--data", filepath.Join(ydir, "yardstick.db"))
	if err != nil {
		return nil, err
	}
	say("yardstick for %d paired windows at %s", cmd.CreatePairs, y.url)
	pairs, err := cmd.runPairs(ctx, y, url, pid, say)
	if stopErr := y.stop(); err == nil {
		err = stopErr
	}
	return pairs, err
}

func (cmd *runCmd) runPairs(ctx context.Context, y *child, url string, pid int, say func(string, ...any)) ([]CreatePair, error) {
	var pairs []CreatePair
	for i := range cmd.CreatePairs {
		awaitQuiet(ctx, pid, quietAtMost) // the server's read models catching up would share the machine
		yp, _, err := cmd.createPhase(ctx, fmt.Sprintf("yardstick-pair-%d", i+1), y.url, y.cmd.Process.Pid, false, say)
		if err != nil {
			return nil, err
		}
		awaitQuiet(ctx, y.cmd.Process.Pid, quietAtMost)
		sp, ledger, err := cmd.createPhase(ctx, fmt.Sprintf("server-pair-%d", i+1), url, pid, false, say)
		if err != nil {
			return nil, err
		}
		p := CreatePair{Yardstick: yp, Server: sp, Ratios: *createRatios(sp, yp)}
		if ledger != nil {
			v, err := load.Verify(ctx, cmd.config(url, false), ledger)
			if err != nil {
				return nil, err
			}
			p.Verify = &v
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}

// pairMedians returns the medians of the pairs' ratios and of the server's create p99s.
func pairMedians(pairs []CreatePair) PairMedians {
	var m PairMedians
	m.Ratios.Creates = median(pairs, func(p CreatePair) float64 { return p.Ratios.Creates })
	m.Ratios.Replays = median(pairs, func(p CreatePair) float64 { return p.Ratios.Replays })
	m.Ratios.CPUPerCreate = median(pairs, func(p CreatePair) float64 { return p.Ratios.CPUPerCreate })
	m.P99 = time.Duration(median(pairs, func(p CreatePair) float64 { return float64(p.Server.Commands.Latency.P99) }))
	return m
}

// median is the median of f over pairs.
func median(pairs []CreatePair, f func(CreatePair) float64) float64 {
	v := make([]float64, len(pairs))
	for i, p := range pairs {
		v[i] = f(p)
	}
	return medianOf(v)
}

// medianOf is the median of v, the mean of the middle two of an even count, 0 of none. It
// sorts a copy: v is left in its order.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// pairsOK reports whether every pair's creates were answered without errors and, where checked,
// verified.
func pairsOK(pairs []CreatePair) bool {
	for _, p := range pairs {
		if p.Server.Commands.Errors > 0 || p.Server.Replays.Errors > 0 || p.Verify != nil && !p.Verify.OK() {
			return false
		}
	}
	return true
}

// reportPairs prints each paired window and the medians.
func reportPairs(w io.Writer, pairs []CreatePair, m PairMedians) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "paired window\tyardstick creates/s\tserver creates/s\tratio\tyardstick time per create\tserver time per create\tratio\tserver p99\tstolen cores (yardstick/server)\t")
	for i, p := range pairs {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.3f\t%v\t%v\t%.2f×\t%v\t%.2f/%.2f\t\n", i+1,
			p.Yardstick.Commands.CommandsPerSecond(), p.Server.Commands.CommandsPerSecond(), p.Ratios.Creates,
			p.Yardstick.CommandsCPU.TargetPerCommand.Round(time.Microsecond), p.Server.CommandsCPU.TargetPerCommand.Round(time.Microsecond),
			p.Ratios.CPUPerCreate, round(p.Server.Commands.Latency.P99), p.Yardstick.CommandsCPU.Stolen, p.Server.CommandsCPU.Stolen)
	}
	fmt.Fprintf(tw, "median\t\t\t%.3f\t\t\t%.2f×\t%v\t\t\n", m.Ratios.Creates, m.Ratios.CPUPerCreate, round(m.P99))
	tw.Flush()
	for i, p := range pairs {
		for _, s := range append(p.Server.Commands.Samples, p.Server.Replays.Samples...) {
			fmt.Fprintf(w, "  pair %d, error: %s\n", i+1, s)
		}
		if p.Verify != nil {
			for _, problem := range p.Verify.Problems {
				fmt.Fprintf(w, "  pair %d, problem: %s\n", i+1, problem)
			}
		}
	}
	fmt.Fprintln(w)
}
