package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/acme/orders/tests/load"
)

// report prints the figures of a run, its targets and its verdict.
func report(w io.Writer, f Figures) {
	c := f.Config
	fmt.Fprintf(w, "%d clients, %v per phase after %v warm-up, seed %d; retry share %.2f, %d deliveries per payment, cancel %.2f, fail %.2f, refund %.2f\n",
		c.Clients, c.Duration, c.Warmup, c.Seed, c.RetryShare, c.Deliveries, c.CancelShare, c.FailShare, c.RefundShare)
	m := f.Machine
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs (%s), %s, commit %s\n\n", m.OS, m.Arch, m.CPUs, m.CPU, m.Go, m.Commit)
	if c.Lifecycles {
		reportPhases(w, f)
	}
	if f.Creates != nil {
		reportCreates(w, *f.Creates)
		if m := f.Creates.Medians; m != nil {
			reportPairs(w, f.Creates.Pairs, *m)
		}
	}
	if f.OpenLoop != nil {
		reportOpenLoop(w, c, *f.OpenLoop)
	}
	if l := f.Server.CommandsLag; l != nil {
		reportLag(w, *l)
	}
	reportTargets(w, f)
	if f.Webhooks != nil {
		reportHooks(w, *f.Webhooks)
	}
	reportVerdict(w, f)
}

// reportPhases prints the lifecycles and replays of the baseline and the server: throughput
// and latency, the server's by command, and the processor use of each.
func reportPhases(w io.Writer, f Figures) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\ttarget\tcommands/s\trequests/s\tp50\tp95\tp99\treplays\t409s\terrors\tunanswered\t")
	row := func(phase, target string, s load.Stats) {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%v\t%v\t%v\t%d\t%d\t%d\t%d\t\n", phase, target, s.CommandsPerSecond(), s.RequestsPerSecond(),
			round(s.Latency.P50), round(s.Latency.P95), round(s.Latency.P99), s.Replays, s.Conflicts, s.Errors, s.Unanswered)
	}
	if f.Baseline != nil {
		row("commands", "baseline", f.Baseline.Commands)
	}
	row("commands", "server", f.Server.Commands)
	if f.Baseline != nil {
		row("replays", "baseline", f.Baseline.Replays)
	}
	row("replays", "server", f.Server.Replays)
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "server commands, by command\tanswers\tp50\tp95\tp99\tmax\t")
	for _, c := range f.Server.Commands.ByCommand {
		name := c.Command
		if c.Replayed {
			name += ", replayed"
		}
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%v\t\n", name, c.Answers, round(c.Latency.P50), round(c.Latency.P95), round(c.Latency.P99), round(c.Latency.Max))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "processor use (cores)\ttarget\tharness\tother processes\tstolen\tidle\ttarget time per command\ttarget disk writes per command\t")
	cpu := func(phase, target string, c CPU) {
		fmt.Fprintf(tw, "%s %s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%v\t%.0f B\t\n", phase, target, c.Target, c.Harness, c.Others, c.Stolen, c.Idle,
			c.TargetPerCommand.Round(time.Microsecond), c.TargetWrittenPerCommand)
	}
	if f.Baseline != nil {
		cpu("commands", "baseline", f.Baseline.CommandsCPU)
	}
	cpu("commands", "server", f.Server.CommandsCPU)
	if f.Baseline != nil {
		cpu("replays", "baseline", f.Baseline.ReplaysCPU)
	}
	cpu("replays", "server", f.Server.ReplaysCPU)
	tw.Flush()
	fmt.Fprintln(w)
}

// reportLag prints the projection lag over the server's lifecycles.
func reportLag(w io.Writer, l Lag) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "projection lag, server commands\tsamples\tfailed\tp50\tp99\tmax\t\n")
	fmt.Fprintf(tw, "acknowledged → GET ?minPosition= answers 200\t%d\t%d\t%v\t%v\t%v\t\n", l.Samples, l.Failed, round(l.P50), round(l.P99), round(l.Max))
	fmt.Fprintf(tw, "server's view (%d polls, %d failed)\tmax lagEvents\tmax lagSeconds\t\t\t\t\n", l.StatusPolls, l.StatusErrors)
	for _, p := range l.Projections {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t\t\t\t\n", p.Name, p.MaxLagEvents, p.MaxLagSeconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "(one sample every %v, one request at a time; a sample includes one HTTP round trip)\n\n", lagEvery)
}

// reportTargets prints each target's figure and whether it was met.
func reportTargets(w io.Writer, f Figures) {
	g := f.Config.Goals
	met := func(ok bool) string { return map[bool]string{true: "met", false: "MISSED"}[ok] }
	if f.Ratios != nil {
		fmt.Fprintf(w, "commands/s vs baseline: %.3f (target ≥ %.2f: %s)\n", f.Ratios.Commands, g.Commands, met(*f.Targets.Commands))
		fmt.Fprintf(w, "replays/s vs baseline:  %.3f (target ≥ %.2f: %s)\n", f.Ratios.Replays, g.Replays, met(*f.Targets.Replays))
	}
	if f.Config.Lifecycles {
		fmt.Fprintf(w, "command p99:            %v (target ≤ %v: %s)\n", round(f.Server.Commands.Latency.P99), g.P99, met(f.Targets.P99))
	}
	if l := f.Server.CommandsLag; l != nil {
		fmt.Fprintf(w, "projection lag p99:     %v, max %v of %d samples, %d failed (target: max ≤ %v, none failed: %s)\n",
			round(l.P99), round(l.Max), l.Samples, l.Failed, g.Lag, met(f.Targets.Lag))
	}
	if c := f.Creates; c != nil {
		r, p99, of := c.VsYardstick, c.Server.Commands.Latency.P99, ""
		if m := c.Medians; m != nil {
			r, p99, of = &m.Ratios, m.P99, fmt.Sprintf(", median of %d paired windows", len(c.Pairs))
		}
		if r != nil {
			fmt.Fprintf(w, "creates/s vs yardstick: %.3f (target ≥ %.2f: %s%s)\n", r.Creates, g.Creates, met(*f.Targets.Creates), of)
			fmt.Fprintf(w, "CPU/create vs yardstick: %.2f× (target ≤ %.0f×: %s%s)\n", r.CPUPerCreate, g.CreateCPU, met(*f.Targets.CreateCPU), of)
		}
		fmt.Fprintf(w, "create p99:             %v (target ≤ %v: %s%s)\n", round(p99), g.CreateP99, met(*f.Targets.CreateP99), of)
	}
}

// reportVerdict prints the checks of the ledgers, every problem and error found, and the verdict.
func reportVerdict(w io.Writer, f Figures) {
	v := f.Verify
	if f.Config.Lifecycles {
		fmt.Fprintf(w, "ledger: %d orders, %d commands acknowledged (%d unanswered), %d events: %d lost, %d duplicated, %d mismatched, %d phantom\n",
			v.Orders, v.Commands, v.Unknown, v.Events, v.Lost, v.Duplicated, v.Mismatched, v.Phantoms)
		fmt.Fprintf(w, "replays identical to the first answer: %d of %d\n", f.Server.Replays.Commands-f.Server.Replays.Errors, f.Server.Replays.Commands)
	}
	for _, p := range v.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	for _, s := range append(f.Server.Commands.Samples, f.Server.Replays.Samples...) {
		fmt.Fprintln(w, "  error:", s)
	}
	if c := f.Creates; c != nil && f.Config.Client == "wrk" {
		fmt.Fprintln(w, "keyed creates driven by wrk: no ledger, nothing verified after")
	} else if c != nil {
		reportCreatesLedger(w, *c)
	}
	if l := f.Server.CommandsLag; l != nil {
		for _, s := range l.Errors {
			fmt.Fprintln(w, "  lag probe:", s)
		}
		if l.StatusError != "" {
			fmt.Fprintf(w, "  lag probe: %s (%d of %d polls failed)\n", l.StatusError, l.StatusErrors, l.StatusPolls)
		}
	}
	fmt.Fprintf(w, "verdict: %s\n", map[bool]string{true: "OK: nothing lost, nothing applied twice, every replay identical", false: "FAILED"}[f.OK])
}

// reportCreatesLedger prints the check of the keyed creates' ledger, and their errors.
func reportCreatesLedger(w io.Writer, c Creates) {
	v := c.Verify
	fmt.Fprintf(w, "ledger of keyed creates: %d orders, %d acknowledged (%d unanswered), %d events: %d lost, %d duplicated, %d mismatched, %d phantom\n",
		v.Orders, v.Commands, v.Unknown, v.Events, v.Lost, v.Duplicated, v.Mismatched, v.Phantoms)
	for _, p := range v.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	samples := append(c.Server.Commands.Samples, c.Server.Replays.Samples...)
	if c.Yardstick != nil {
		samples = append(samples, c.Yardstick.Commands.Samples...)
		samples = append(samples, c.Yardstick.Replays.Samples...)
	}
	for _, s := range samples {
		fmt.Fprintln(w, "  error:", s)
	}
}

// reportCreates prints the keyed creates of every target, and the server's figures as ratios
// to the baseline's and the yardstick's.
func reportCreates(w io.Writer, c Creates) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keyed creates\ttarget\tper second\tp50\tp99\treplays\terrors\ttarget cores\tother cores\tstolen\ttarget time per create\ttarget disk writes per create\t")
	row := func(phase, target string, s load.Stats, cpu CPU) {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%d\t%d\t%.2f\t%.2f\t%.2f\t%v\t%.0f B\t\n", phase, target, s.CommandsPerSecond(),
			round(s.Latency.P50), round(s.Latency.P99), s.Replays, s.Errors, cpu.Target, cpu.Harness+cpu.Others, cpu.Stolen,
			cpu.TargetPerCommand.Round(time.Microsecond), cpu.TargetWrittenPerCommand)
	}
	targets := []struct {
		name string
		p    *Phase
	}{{"baseline", c.Baseline}, {"yardstick", c.Yardstick}, {"server", &c.Server}}
	for _, t := range targets {
		if t.p != nil {
			row("creates", t.name, t.p.Commands, t.p.CommandsCPU)
		}
	}
	for _, t := range targets {
		if t.p != nil && t.p.Replays.Requests > 0 { // none with wrk
			row("replays", t.name, t.p.Replays, t.p.ReplaysCPU)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	if c.VsBaseline == nil && c.VsYardstick == nil {
		return
	}
	fmt.Fprintln(tw, "server's keyed creates, times the\tbaseline's\tyardstick's\t")
	fig := func(r *CreateRatios, f func(CreateRatios) float64) string {
		if r == nil || f(*r) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", f(*r))
	}
	for _, l := range []struct {
		name string
		f    func(CreateRatios) float64
	}{
		{"creates/s", func(r CreateRatios) float64 { return r.Creates }},
		{"replays/s", func(r CreateRatios) float64 { return r.Replays }},
		{"server processor time per create", func(r CreateRatios) float64 { return r.CPUPerCreate }},
	} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", l.name, fig(c.VsBaseline, l.f), fig(c.VsYardstick, l.f))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
