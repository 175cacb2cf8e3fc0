package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// maxRounds bounds --rounds: each round runs the server's measured phases against both builds.
const maxRounds = 20

// Alternation is the output of two --bin builds measured in turn, A then B, round after round:
// a machine that drifts over the run moves both builds alike, and the medians leave out a
// round that met a busy neighbour.
type Alternation struct {
	Machine  Machine    `json:"machine"`
	Config   runCmd     `json:"config"`
	Rounds   []Round    `json:"rounds"` // A1, B1, A2, B2, …
	Measures []Compared `json:"measures"`
	OK       bool       `json:"ok"` // every round's verdict
}

// Round is one build's measured phases in one round.
type Round struct {
	Build   string  `json:"build"` // "A", the first --bin, or "B"
	Round   int     `json:"round"` // from 1
	Figures Figures `json:"figures"`
}

// Compared is one measure of both builds: each round's figure, each build's median, and B/A.
type Compared struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	A       []float64 `json:"a"`
	B       []float64 `json:"b"`
	MedianA float64   `json:"medianA"`
	MedianB float64   `json:"medianB"`
	Ratio   float64   `json:"ratio"` // MedianB / MedianA; 0 where either is 0
}

// Units of the compared measures.
const (
	unitPerSecond = "/s"
	unitTime      = "time"
	unitBytes     = "bytes"
	unitCount     = "count"
	unitRatio     = "×"
)

// measure is one figure of a round.
type measure struct {
	name, unit string
	value      float64
}

// alternate measures the server's phases against the two --bin builds in turn, --rounds times,
// each on a data directory of its own that is removed after, and writes their comparison.
func (cmd *runCmd) alternate(ctx context.Context, dir string, stdout io.Writer, say func(string, ...any)) error {
	alt := Alternation{Machine: machine(), Config: *cmd, OK: true}
	for r := range cmd.Rounds {
		for i, bin := range cmd.Bin {
			build := string(rune('A' + i))
			say("round %d of %d, build %s: %s", r+1, cmd.Rounds, build, bin)
			f := cmd.newFigures()
			label := fmt.Sprintf("server-%s%d", build, r+1)
			data := filepath.Join(dir, "data-"+label)
			err := cmd.serveAndMeasure(ctx, dir, bin, label, data, &f, say)
			os.RemoveAll(data)
			if err != nil {
				return fmt.Errorf("round %d, build %s: %w", r+1, build, err)
			}
			f.judge()
			alt.OK = alt.OK && f.OK
			alt.Rounds = append(alt.Rounds, Round{Build: build, Round: r + 1, Figures: f})
		}
	}
	alt.Measures = compare(alt.Rounds)
	if err := cmd.write(stdout, alt, func(w io.Writer) { reportAlternation(w, alt) }); err != nil {
		return err
	}
	if !alt.OK {
		return fmt.Errorf("a build lost, duplicated or mismatched commands, answered with errors, or delivered webhooks wrongly (see above)")
	}
	return nil
}

// compare gathers each measure of the rounds by build, in the order the rounds name them, with
// each build's median and the ratio of B's to A's.
func compare(rounds []Round) []Compared {
	var out []Compared
	at := map[string]int{} // bounded by the measures a round has
	for _, r := range rounds {
		for _, m := range measures(r.Figures) {
			i, ok := at[m.name]
			if !ok {
				i = len(out)
				at[m.name] = i
				out = append(out, Compared{Name: m.name, Unit: m.unit})
			}
			if r.Build == "A" {
				out[i].A = append(out[i].A, m.value)
			} else {
				out[i].B = append(out[i].B, m.value)
			}
		}
	}
	for i := range out {
		c := &out[i]
		c.MedianA, c.MedianB = medianOf(c.A), medianOf(c.B)
		c.Ratio = ratio(c.MedianB, c.MedianA)
	}
	return out
}

// measures are the figures of a round's phases that two builds are compared on.
func measures(f Figures) []measure {
	var m []measure
	add := func(name, unit string, v float64) { m = append(m, measure{name, unit, v}) }
	if f.Server.CommandsLag != nil { // the lifecycles ran
		s := f.Server
		add("lifecycles: commands/s", unitPerSecond, s.Commands.CommandsPerSecond())
		add("lifecycles: command p99", unitTime, float64(s.Commands.Latency.P99))
		add("lifecycles: processor per command", unitTime, float64(s.CommandsCPU.TargetPerCommand))
		add("lifecycles: disk writes per command", unitBytes, s.CommandsCPU.TargetWrittenPerCommand)
		add("lifecycles: projection lag p99", unitTime, float64(s.CommandsLag.P99))
		add("replays/s", unitPerSecond, s.Replays.CommandsPerSecond())
		add("replays: processor per replay", unitTime, float64(s.ReplaysCPU.TargetPerCommand))
	}
	if w := f.Webhooks; w != nil {
		add("webhooks: deliveries/s", unitPerSecond, w.PerSecond)
		add("webhooks: lag p99", unitTime, float64(w.P99))
	}
	if c := f.Creates; c != nil {
		s := c.Server
		add("creates: creates/s", unitPerSecond, s.Commands.CommandsPerSecond())
		add("creates: p99", unitTime, float64(s.Commands.Latency.P99))
		add("creates: processor per create", unitTime, float64(s.CommandsCPU.TargetPerCommand))
		add("creates: disk writes per create", unitBytes, s.CommandsCPU.TargetWrittenPerCommand)
		if md := c.Medians; md != nil {
			add("create pairs: creates/s vs yardstick, median", unitRatio, md.Ratios.Creates)
			add("create pairs: processor per create vs yardstick, median", unitRatio, md.Ratios.CPUPerCreate)
		}
	}
	if o := f.OpenLoop; o != nil {
		for _, r := range o.Rates {
			m = append(m, rateMeasures(r)...)
		}
	}
	return m
}

// rateMeasures are the server's figures of one rate of the open loop.
func rateMeasures(r OpenRate) []measure {
	p, s := fmt.Sprintf("open loop %d/s: ", r.Rate), r.Server
	m := []measure{
		{p + "creates/s", unitPerSecond, s.Achieved},
		{p + "p50", unitTime, float64(s.P50)},
		{p + "p99", unitTime, float64(s.P99)},
		{p + "max", unitTime, float64(s.Max)},
		{p + "errors", unitCount, float64(s.Errors)},
		{p + "processor per create", unitTime, float64(s.CPU.TargetPerCommand)},
		{p + "disk writes per create", unitBytes, s.CPU.TargetWrittenPerCommand},
	}
	if r.Yardstick != nil {
		m = append(m, measure{p + "p99 vs yardstick", unitRatio, r.P99VsYardstick})
	}
	return m
}

// reportAlternation prints each round's verdict, then each measure's figures by build, their
// medians and B/A, then what went wrong in the rounds that failed.
func reportAlternation(w io.Writer, alt Alternation) {
	c, m := alt.Config, alt.Machine
	fmt.Fprintf(w, "A = %s, B = %s: %d rounds of A then B, each on a fresh data directory; %v per phase after %v warm-up, %d clients\n",
		c.Bin[0], c.Bin[1], c.Rounds, c.Duration, c.Warmup, c.Clients)
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs (%s), %s, commit %s\n\n", m.OS, m.Arch, m.CPUs, m.CPU, m.Go, m.Commit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tA, median\tB, median\tB/A\tA by round\tB by round\t")
	for _, x := range alt.Measures {
		ratio := "-"
		if x.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f", x.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Name, formatMeasure(x.Unit, x.MedianA), formatMeasure(x.Unit, x.MedianB), ratio,
			formatAll(x.Unit, x.A), formatAll(x.Unit, x.B))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range alt.Rounds {
		cpu := r.Figures.Server.CommandsCPU
		if !r.Figures.OK {
			fmt.Fprintf(w, "round %d, build %s:\n", r.Round, r.Build)
			reportVerdict(w, r.Figures)
		} else if cpu.Stolen > 0.1 {
			fmt.Fprintf(w, "round %d, build %s: %.2f cores stolen over its lifecycles\n", r.Round, r.Build, cpu.Stolen)
		}
	}
	fmt.Fprintf(w, "verdict: %s\n", map[bool]string{true: "OK: every round of both builds lost nothing, applied nothing twice, replayed identically", false: "FAILED"}[alt.OK])
}

// formatMeasure prints v in its unit.
func formatMeasure(unit string, v float64) string {
	switch unit {
	case unitTime:
		return round(time.Duration(v)).String()
	case unitBytes:
		return fmt.Sprintf("%.0f B", v)
	case unitRatio:
		return fmt.Sprintf("%.3f×", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func formatAll(unit string, v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = formatMeasure(unit, x)
	}
	return strings.Join(s, " ")
}
