package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/acme/orders/tests/load"
)

// wrkCreates is the Lua script of keyed creates for wrk.
//
//go:embed wrk_creates.lua
var wrkCreates []byte

// wrkFigures is the line that the script's done() prints.
type wrkFigures struct {
	Requests     int   `json:"requests"`
	Replays      int   `json:"replays"`
	Conflicts    int   `json:"conflicts"`
	Bad          int   `json:"bad"` // answers other than 201 and 409
	SocketErrors int   `json:"socketErrors"`
	DurationUs   int64 `json:"durationUs"`
	P50Us        int64 `json:"p50Us"`
	P95Us        int64 `json:"p95Us"`
	P99Us        int64 `json:"p99Us"`
	MaxUs        int64 `json:"maxUs"`
}

func (w wrkFigures) stats() load.Stats {
	us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
	s := load.Stats{Elapsed: us(w.DurationUs), Requests: w.Requests, Replays: w.Replays, Conflicts: w.Conflicts,
		Errors: w.Bad + w.SocketErrors, Commands: w.Requests - w.Replays - w.Conflicts - w.Bad,
		Latency: load.Latency{P50: us(w.P50Us), P95: us(w.P95Us), P99: us(w.P99Us), Max: us(w.MaxUs)}}
	if s.Errors > 0 {
		s.Samples = []string{fmt.Sprintf("wrk: %d answers other than 201 or 409, %d socket errors", w.Bad, w.SocketErrors)}
	}
	return s
}

// wrkPhase drives keyed creates with wrk instead of the Go clients: a warm-up run, then the
// measured one, with the target's processor use sampled at its ends. wrk keeps no ledger, so
// there is nothing to replay or verify afterwards; retries within the run are replayed.
func (cmd *runCmd) wrkPhase(ctx context.Context, name, url string, pid int, say func(string, ...any)) (Phase, error) {
	f, err := os.CreateTemp("", "orders-load-*.lua")
	if err != nil {
		return Phase{}, err
	}
	script := f.Name()
	defer os.Remove(script)
	_, err = f.Write(wrkCreates)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Phase{}, err
	}
	say("%s: wrk, %d connections, keyed creates for %v after %v of warm-up", name, cmd.Clients, cmd.Duration, cmd.Warmup)
	run := fmt.Sprintf("%s-wrk%x", name, rand.Uint32())
	if cmd.Warmup > 0 {
		if _, err := cmd.wrk(ctx, script, url, run+"-warm", cmd.Warmup); err != nil {
			return Phase{}, err
		}
	}
	before := sampleCPU(pid)
	w, err := cmd.wrk(ctx, script, url, run, cmd.Duration)
	if err != nil {
		return Phase{}, err
	}
	s := w.stats()
	p := Phase{Commands: s, CommandsCPU: cpuBetween(before, sampleCPU(pid), s.Commands)}
	say("%s: %.0f creates/s", name, s.CommandsPerSecond())
	return p, nil
}

// wrk runs wrk for d, in whole seconds (its unit), and reads the figures that the script prints last.
func (cmd *runCmd) wrk(ctx context.Context, script, url, run string, d time.Duration) (wrkFigures, error) {
	threads := min(2, cmd.Clients)
	c := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(cmd.Clients),
		"-d", fmt.Sprintf("%ds", max(1, int(d.Round(time.Second).Seconds()))), "-s", script, url, "--",
		run, strconv.FormatFloat(cmd.RetryShare, 'f', -1, 64))
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return wrkFigures{}, fmt.Errorf("wrk: %v\n%s%s", err, out, stderr.Bytes())
	}
	out = bytes.TrimSpace(out)
	last := out[bytes.LastIndexByte(out, '\n')+1:]
	var w wrkFigures
	if err := json.Unmarshal(last, &w); err != nil {
		return wrkFigures{}, fmt.Errorf("wrk printed %q: %w", out, err)
	}
	return w, nil
}
