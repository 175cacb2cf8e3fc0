package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/acme/orders/tests/load"
)

// goals are what the figures are judged against, each a flag: keyed commands at a quarter of
// the echo baseline's rate with a p99 under 50 ms, replays nearly as cheap as the baseline's
// requests since a replay reads nothing, and keyed creates alone at a third of the durable
// yardstick's creates/s at most three times its processor time per create, the price of the
// key protocol and the read models over a bare durable insert.
type goals struct {
	Commands  float64       `name:"target-commands" default:"0.25" json:"commands" help:"Keyed commands/s to reach, times the echo baseline's."`
	P99       time.Duration `name:"target-p99" default:"50ms" json:"p99Ns" help:"Command p99 to stay within."`
	Replays   float64       `name:"target-replays" default:"0.9" json:"replays" help:"Replays/s to reach, times the echo baseline's."`
	Creates   float64       `name:"target-creates" default:"0.33" json:"creates" help:"Keyed creates/s to reach, times the durable yardstick's."`
	CreateCPU float64       `name:"target-create-cpu" default:"3" json:"createCpu" help:"Server processor time per create to stay within, times the yardstick's."`
	CreateP99 time.Duration `name:"target-create-p99" default:"50ms" json:"createP99Ns" help:"Create p99 to stay within."`
	Lag       time.Duration `name:"target-lag" default:"1s" json:"lagNs" help:"Projection lag to stay within: the slowest sample, every sample answered."`
}

// Figures is the JSON output.
type Figures struct {
	Machine  Machine      `json:"machine"`
	Config   runCmd       `json:"config"`
	Baseline *Phase       `json:"baseline,omitempty"`
	Server   Phase        `json:"server"`
	Verify   load.Report  `json:"verify"`
	Webhooks *Webhooks    `json:"webhooks,omitempty"`
	Ratios   *Ratios      `json:"ratios,omitempty"`
	Creates  *Creates     `json:"creates,omitempty"`
	OpenLoop *OpenLoop    `json:"openLoop,omitempty"`
	Targets  TargetStatus `json:"targets"`
	OK       bool         `json:"ok"` // nothing lost, duplicated, mismatched; no errors
}

// Phase is one target's figures: the lifecycles, then the replay of every acknowledged command.
type Phase struct {
	Commands    load.Stats `json:"commands"`
	CommandsCPU CPU        `json:"commandsCpu"`
	Replays     load.Stats `json:"replays"`
	ReplaysCPU  CPU        `json:"replaysCpu"`
	// CommandsLag is the projection lag over the window of the lifecycles; none for the
	// baseline, which has no read models.
	CommandsLag *Lag `json:"commandsLag,omitempty"`

	window [2]time.Time // the measured window of the lifecycles
}

// Ratios compare the server with the baseline.
type Ratios struct {
	Commands float64 `json:"commands"` // commands/s
	Replays  float64 `json:"replays"`  // replays/s
}

// Creates are the figures of keyed creates alone (and their replays), on every target: the
// yardstick knows nothing else. The server's creates come after its lifecycles, on the same
// store.
type Creates struct {
	Baseline  *Phase      `json:"baseline,omitempty"`
	Yardstick *Phase      `json:"yardstick,omitempty"`
	Server    Phase       `json:"server"`
	Verify    load.Report `json:"verify"`
	// VsBaseline and VsYardstick compare the server with each reference.
	VsBaseline  *CreateRatios `json:"vsBaseline,omitempty"`
	VsYardstick *CreateRatios `json:"vsYardstick,omitempty"`
	// Pairs are the paired windows (--create-pairs), and Medians their medians.
	Pairs   []CreatePair `json:"pairs,omitempty"`
	Medians *PairMedians `json:"medians,omitempty"`
}

// CreateRatios compare the server's keyed creates with a reference's: the server's figure
// divided by the reference's, 0 where either is unknown.
type CreateRatios struct {
	Creates      float64 `json:"creates"`      // creates/s
	Replays      float64 `json:"replays"`      // replays/s
	CPUPerCreate float64 `json:"cpuPerCreate"` // processor time of the target process per create
}

func createRatios(server, ref Phase) *CreateRatios {
	return &CreateRatios{
		Creates:      ratio(server.Commands.CommandsPerSecond(), ref.Commands.CommandsPerSecond()),
		Replays:      ratio(server.Replays.CommandsPerSecond(), ref.Replays.CommandsPerSecond()),
		CPUPerCreate: ratio(float64(server.CommandsCPU.TargetPerCommand), float64(ref.CommandsCPU.TargetPerCommand)),
	}
}

func ratio(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}

// TargetStatus says which targets were met.
type TargetStatus struct {
	Commands *bool `json:"commands,omitempty"`
	P99      bool  `json:"p99"`
	Replays  *bool `json:"replays,omitempty"`
	Lag      bool  `json:"lag"` // max of the lag samples ≤ g.Lag, none failed
	// Keyed creates alone, with the yardstick measured.
	Creates   *bool `json:"creates,omitempty"`
	CreateCPU *bool `json:"createCpu,omitempty"`
	CreateP99 *bool `json:"createP99,omitempty"`
}

// Machine is where the figures were taken.
type Machine struct {
	OS, Arch string
	CPUs     int
	CPU      string
	Go       string
	Commit   string
}

// judge computes the ratios of the figures and which targets they meet, and whether the run
// was OK as far as the server's phases tell.
func (f *Figures) judge() {
	g := f.Config.Goals
	if f.Server.CommandsLag != nil { // the server's lifecycles ran
		f.Targets.P99 = f.Server.Commands.Latency.P99 <= g.P99
		f.Targets.Lag = f.Server.CommandsLag.met(g.Lag)
	}
	if f.Baseline != nil {
		f.Ratios = &Ratios{
			Commands: f.Server.Commands.CommandsPerSecond() / f.Baseline.Commands.CommandsPerSecond(),
			Replays:  f.Server.Replays.CommandsPerSecond() / f.Baseline.Replays.CommandsPerSecond(),
		}
		cm, rm := f.Ratios.Commands >= g.Commands, f.Ratios.Replays >= g.Replays
		f.Targets.Commands, f.Targets.Replays = &cm, &rm
	}
	f.OK = f.Verify.OK() && f.Server.Commands.Errors == 0 && f.Server.Replays.Errors == 0
	if c := f.Creates; c != nil {
		if c.Baseline != nil {
			c.VsBaseline = createRatios(c.Server, *c.Baseline)
		}
		var judged *CreateRatios // the ratios the create targets are judged on
		p99 := c.Server.Commands.Latency.P99
		if c.Yardstick != nil {
			c.VsYardstick = createRatios(c.Server, *c.Yardstick)
			judged = c.VsYardstick
		}
		if len(c.Pairs) > 0 {
			m := pairMedians(c.Pairs)
			c.Medians, judged, p99 = &m, &m.Ratios, m.P99
		}
		if judged != nil {
			cr, cpu := judged.Creates >= g.Creates, judged.CPUPerCreate <= g.CreateCPU
			f.Targets.Creates, f.Targets.CreateCPU = &cr, &cpu
		}
		p99Met := p99 <= g.CreateP99
		f.Targets.CreateP99 = &p99Met
		f.OK = f.OK && c.Verify.OK() && c.Server.Commands.Errors == 0 && c.Server.Replays.Errors == 0 && pairsOK(c.Pairs)
	}
	f.OK = f.OK && (f.Webhooks == nil || f.Webhooks.ok())
}

func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}
