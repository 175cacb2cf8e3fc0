// Command load measures the order service under concurrent order lifecycles against a baseline
// in the same run, and proves that it lost and duplicated nothing.
//
// It starts a minimal echo baseline (same routes, same JSON decoding, nothing stored) and runs
// the workload of package tests/load against it, then starts the real server on a fresh data
// directory (or targets --url) and runs the same workload against it; both phases are followed,
// once the target is idle, by a replay of every acknowledged command. Keyed creates alone are then measured on the
// baseline, on a durable yardstick (the least a durable keyed create costs: one writer batching
// INSERTs into SQLite, synchronous=FULL) and on the server, whose figures are given as ratios to
// both. It then checks the server against the clients' ledgers and prints the figures as a
// table, or as JSON with --json.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/acme/orders/tests/load"
	"github.com/alecthomas/kong"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type cli struct {
	Run            runCmd            `cmd:"" default:"withargs" help:"Measure the service against the baseline and verify it (the default)."`
	ServeBaseline  serveBaselineCmd  `cmd:"" hidden:"" help:"Serve the baseline on a loopback port (the tool runs this as its own child)."`
	ServeYardstick serveYardstickCmd `cmd:"" hidden:"" help:"Serve the durable yardstick of keyed creates on a loopback port (the tool runs this as its own child)."`
}

type serveBaselineCmd struct{}

func (serveBaselineCmd) Run(ctx context.Context, e *env) error {
	return serve(ctx, e.stdout, load.Baseline())
}

type serveYardstickCmd struct {
	Data string `required:"" help:"SQLite file of the keyed creates."`
}

func (c serveYardstickCmd) Run(ctx context.Context, e *env) error {
	y, err := load.OpenYardstick(c.Data)
	if err != nil {
		return err
	}
	err = serve(ctx, e.stdout, y.Handler())
	if cerr := y.Close(); err == nil {
		err = cerr
	}
	return err
}

type runCmd struct {
	URL         string        `help:"Base URL of a running server to measure, instead of starting one."`
	Bin         string        `help:"Server binary to start; default: build ./cmd/api of this module."`
	Data        string        `help:"Data directory of the started server; default: a fresh temporary one."`
	ServerArg   []string      `help:"Extra flag for 'api serve', repeatable (such as --server-arg=--pprof-addr=127.0.0.1:6060)."`
	Token       string        `help:"Bearer API key, for a server with a keys file."`
	Clients     int           `default:"64" help:"Concurrent clients."`
	Duration    time.Duration `default:"20s" help:"Measured window of each phase."`
	Warmup      time.Duration `default:"3s" help:"Unmeasured run before each window."`
	Orders      int           `help:"Run this many order lifecycles per phase instead of --duration."`
	RetryShare  float64       `default:"0.1" help:"Share of commands sent again with their key (half sequentially, half concurrently)."`
	Deliveries  int           `default:"3" help:"Deliveries of each payment confirmation."`
	CancelShare float64       `default:"0.15" help:"Share of orders cancelled."`
	FailShare   float64       `default:"0.05" help:"Share of orders whose first payment fails."`
	RefundShare float64       `default:"0.2" help:"Share of shipped orders refunded."`
	Seed        uint64        `default:"1" help:"Seed of the workload's choices."`
	Baseline    bool          `default:"true" negatable:"" help:"Measure the baseline and the yardstick first."`
	Yardstick   bool          `default:"true" negatable:"" help:"Measure the durable yardstick of keyed creates (skipped with --no-baseline too)."`
	Creates     bool          `default:"true" negatable:"" help:"Measure keyed creates alone on each target too, after its lifecycles."`
	Client      string        `default:"go" enum:"go,wrk" help:"Clients of the keyed creates: the workload's Go clients (answers checked, replayed and verified after) or wrk (its own retries only; must be installed)."`
	CreatePairs int           `help:"After the server's keyed creates, run this many paired windows of keyed creates (0 to 20), the yardstick's and then the server's, and judge the create targets on the medians of the pairs: a machine that drifts between two far-apart windows then moves both sides of each ratio alike."`
	JSON        string        `help:"Write the figures as JSON to this file ('-' for stdout, instead of the table)."`
	CPUProfile  string        `name:"cpu-profile" help:"Write a CPU profile of the started server over the measured window of its lifecycles to this file (the server runs with --pprof-addr)."`
	Webhooks    int           `help:"Register this many webhook endpoints (0 to 1000) for the clients before the server's lifecycles, each at a receiver in the harness that checks every delivery; report the delivery lag and deliveries/s. A started server gets --webhooks-allow-private and a generated secret key."`
}

type env struct {
	stdout, stderr io.Writer
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c cli
	helped := false // --help was printed: nothing more to do
	parser, err := kong.New(&c, kong.Name("load"),
		kong.Description("Measure the order service under load against a baseline, and verify it lost and duplicated nothing."),
		kong.Writers(stdout, stderr), kong.Exit(func(int) { helped = true }))
	if err != nil {
		return err
	}
	kctx, err := parser.Parse(args)
	if helped {
		return nil
	}
	if err != nil {
		return err
	}
	kctx.BindTo(ctx, (*context.Context)(nil))
	return kctx.Run(&env{stdout: stdout, stderr: stderr})
}

// Targets for this 2-core machine with harness and server sharing it: keyed commands at a
// quarter of the echo baseline's rate with a p99 under 50 ms, and replays nearly as cheap as the
// baseline's requests, since a replay reads nothing.
const (
	targetCommands = 0.25 // keyed commands/s, times the baseline's
	targetP99      = 50 * time.Millisecond
	targetReplays  = 0.9 // replays/s, times the baseline's
)

// Targets of keyed creates alone, against the durable yardstick: a third of its creates/s at
// most three times its processor time per create, the price of the key protocol and the read
// models over a bare durable insert.
const (
	targetCreates   = 0.33 // creates/s, times the yardstick's
	targetCreateCPU = 3.0  // server processor time per create, times the yardstick's
	targetCreateP99 = 50 * time.Millisecond
)

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
	Lag      bool  `json:"lag"` // max of the lag samples ≤ targetLag, none failed
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

func (cmd *runCmd) Run(ctx context.Context, e *env) error {
	if cmd.Webhooks < 0 || cmd.Webhooks > maxWebhookEndpoints {
		return fmt.Errorf("--webhooks %d: want 0 to %d endpoints", cmd.Webhooks, maxWebhookEndpoints)
	}
	if cmd.CreatePairs < 0 || cmd.CreatePairs > maxCreatePairs || cmd.CreatePairs > 0 && !cmd.Creates {
		return fmt.Errorf("--create-pairs %d: want 0 to %d pairs, with --creates", cmd.CreatePairs, maxCreatePairs)
	}
	dir, err := os.MkdirTemp("", "orders-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	say := func(format string, args ...any) { fmt.Fprintf(e.stderr, "load: "+format+"\n", args...) }

	f := Figures{Machine: machine(), Config: *cmd}
	if cmd.Creates {
		f.Creates = &Creates{}
	}
	if cmd.Baseline {
		if err := cmd.references(ctx, dir, &f, say); err != nil {
			return err
		}
	}

	url, pid := cmd.URL, 0 // pid unknown for --url: its time counts as the others'
	var srv *child
	var pprofAddr string
	if url == "" {
		if srv, pprofAddr, err = cmd.startServer(ctx, dir, say); err != nil {
			return err
		}
		url, pid = srv.url, srv.cmd.Process.Pid
	}
	hookCtx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	err = cmd.measure(ctx, hookCtx, dir, url, pid, pprofAddr, &f, say)
	if srv != nil {
		if stopErr := srv.stop(); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return err
	}
	f.judge()
	f.OK = f.OK && (f.Webhooks == nil || f.Webhooks.ok())
	if err := cmd.output(e.stdout, f); err != nil {
		return err
	}
	if !f.OK {
		return fmt.Errorf("the server lost, duplicated or mismatched commands, answered with errors, or delivered webhooks wrongly (see above)")
	}
	return nil
}

// startServer builds the service unless --bin names it, and starts it on a data directory in
// dir unless --data names one. pprofAddr is where it serves its profiles, with --cpu-profile.
func (cmd *runCmd) startServer(ctx context.Context, dir string, say func(string, ...any)) (srv *child, pprofAddr string, err error) {
	bin := cmd.Bin
	if bin == "" {
		say("building ./cmd/api")
		if bin, err = buildServer(ctx, dir); err != nil {
			return nil, "", err
		}
	}
	data := cmd.Data
	if data == "" {
		data = dir + "/data"
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, cmd.ServerArg...)
	if cmd.CPUProfile != "" {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, "", err
		}
		args = append(args, "--pprof-addr", pprofAddr)
	}
	if cmd.Webhooks > 0 {
		args = append(args, "--webhooks-allow-private", "--webhooks-generate-key", "--webhooks-secret-key-file", filepath.Join(dir, "webhooks.key"))
	}
	if srv, err = startChild(ctx, dir, "server", bin, args...); err != nil {
		return nil, "", err
	}
	say("server at %s, data in %s", srv.url, data)
	return srv, pprofAddr, nil
}

// measure runs the server's phases against url into f: the lifecycles and their replays, the
// webhook deliveries, the check of the ledger, then the keyed creates and their paired windows.
// The webhook endpoints receive until hookCtx ends.
func (cmd *runCmd) measure(ctx, hookCtx context.Context, dir, url string, pid int, pprofAddr string, f *Figures, say func(string, ...any)) error {
	profiled := make(chan error, 1)
	if pprofAddr != "" {
		go func() { profiled <- cmd.profile(ctx, pprofAddr) }()
	} else {
		profiled <- nil
	}
	hooks, err := cmd.registerHooks(hookCtx, url, say)
	if err != nil {
		return err
	}
	p, ledger, err := cmd.phase(ctx, url, pid, false, say)
	if err == nil && hooks != nil {
		say("waiting for the deliveries to %d webhook endpoints", cmd.Webhooks)
		f.Webhooks, err = checkHooks(ctx, url, cmd.Token, ledger, hooks, p.window[0], p.window[1])
	}
	if perr := <-profiled; err == nil && perr != nil {
		err = perr
	} else if pprofAddr != "" {
		say("CPU profile of the server in %s", cmd.CPUProfile)
	}
	if err == nil {
		say("verifying %d orders against the ledger", len(ledger.Orders()))
		f.Verify, err = load.Verify(ctx, cmd.config(url, false), ledger)
	}
	if err == nil && f.Creates != nil {
		var creates *load.Ledger
		if f.Creates.Server, creates, err = cmd.createPhase(ctx, "server", url, pid, false, say); err == nil && creates != nil {
			say("verifying %d created orders against the ledger", len(creates.Orders()))
			f.Creates.Verify, err = load.Verify(ctx, cmd.config(url, false), creates)
		}
		if err == nil && cmd.CreatePairs > 0 {
			f.Creates.Pairs, err = cmd.createPairs(ctx, dir, url, pid, say)
		}
	}
	f.Server = p
	return err
}

// output writes f as --json asks: the report, the JSON on standard output, or both, the JSON
// into a file.
func (cmd *runCmd) output(stdout io.Writer, f Figures) error {
	switch cmd.JSON {
	case "":
		report(stdout, f)
	case "-":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	default:
		report(stdout, f)
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(cmd.JSON, append(b, '\n'), 0o644)
	}
	return nil
}

// judge computes the ratios of the figures and which targets they meet, and whether the run
// was OK as far as the server's phases tell.
func (f *Figures) judge() {
	f.Targets.P99 = f.Server.Commands.Latency.P99 <= targetP99
	f.Targets.Lag = f.Server.CommandsLag.met()
	if f.Baseline != nil {
		f.Ratios = &Ratios{
			Commands: f.Server.Commands.CommandsPerSecond() / f.Baseline.Commands.CommandsPerSecond(),
			Replays:  f.Server.Replays.CommandsPerSecond() / f.Baseline.Replays.CommandsPerSecond(),
		}
		cm, rm := f.Ratios.Commands >= targetCommands, f.Ratios.Replays >= targetReplays
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
			cr, cpu := judged.Creates >= targetCreates, judged.CPUPerCreate <= targetCreateCPU
			f.Targets.Creates, f.Targets.CreateCPU = &cr, &cpu
		}
		p99Met := p99 <= targetCreateP99
		f.Targets.CreateP99 = &p99Met
		f.OK = f.OK && c.Verify.OK() && c.Server.Commands.Errors == 0 && c.Server.Replays.Errors == 0 && pairsOK(c.Pairs)
	}
}

// registerHooks starts the harness's webhook receiver and registers --webhooks endpoints at
// it; nil without --webhooks.
func (cmd *runCmd) registerHooks(ctx context.Context, url string, say func(string, ...any)) (*hookReceiver, error) {
	if cmd.Webhooks == 0 {
		return nil, nil
	}
	rc := &hookReceiver{}
	hookURLs, err := startHookReceiver(ctx, rc, cmd.Webhooks)
	if err != nil {
		return nil, err
	}
	if err := registerHooks(ctx, url, cmd.Token, hookURLs, rc); err != nil {
		return nil, err
	}
	say("%d webhook endpoints registered, each receiving at a port of its own", cmd.Webhooks)
	return rc, nil
}

// references measures the baseline (lifecycles, then keyed creates) and the yardstick (keyed
// creates), each started as a child of its own and stopped before the next.
func (cmd *runCmd) references(ctx context.Context, dir string, f *Figures, say func(string, ...any)) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := startChild(ctx, dir, "baseline", self, "serve-baseline")
	if err != nil {
		return err
	}
	say("baseline at %s", b.url)
	p, _, err := cmd.phase(ctx, b.url, b.cmd.Process.Pid, true, say)
	f.Baseline = &p
	if err == nil && f.Creates != nil {
		var c Phase
		c, _, err = cmd.createPhase(ctx, "baseline", b.url, b.cmd.Process.Pid, true, say)
		f.Creates.Baseline = &c
	}
	if stopErr := b.stop(); err == nil {
		err = stopErr
	}
	if err != nil || f.Creates == nil || !cmd.Yardstick {
		return err
	}
	y, err := startChild(ctx, dir, "yardstick", self, "serve-yardstick", "--data", filepath.Join(dir, "yardstick.db"))
	if err != nil {
		return err
	}
	say("yardstick at %s", y.url)
	c, _, err := cmd.createPhase(ctx, "yardstick", y.url, y.cmd.Process.Pid, false, say)
	f.Creates.Yardstick = &c
	if stopErr := y.stop(); err == nil {
		err = stopErr
	}
	return err
}

// createPhase runs keyed creates alone, then replays every acknowledged create. The yardstick
// runs as a store (baseline false): its answers and replays are checked as the server's are.
func (cmd *runCmd) createPhase(ctx context.Context, name, url string, pid int, baseline bool, say func(string, ...any)) (Phase, *load.Ledger, error) {
	if cmd.Client == "wrk" {
		p, err := cmd.wrkPhase(ctx, name, url, pid, say)
		return p, nil, err
	}
	cfg := cmd.config(url, baseline)
	cfg.CreatesOnly = true
	say("%s: %d clients, keyed creates for %v after %v of warm-up", name, cmd.Clients, cmd.Duration, cmd.Warmup)
	runCtx, cancel := context.WithCancel(ctx)
	window := cmd.cpuWindow(runCtx, pid)
	res, err := load.Run(ctx, cfg)
	cancel()
	w := <-window
	if err != nil {
		return Phase{}, nil, err
	}
	p := Phase{Commands: res.Stats, CommandsCPU: cpuBetween(w[0], w[1], res.Stats.Commands)}
	say("%s: %.0f creates/s; replaying %d acknowledged creates once it is idle (after %v)", name, res.Stats.CommandsPerSecond(),
		len(res.Ledger.Commands()), awaitQuiet(ctx, pid, quietAtMost).Round(time.Millisecond))
	before := sampleCPU(pid)
	if p.Replays, err = load.Replay(ctx, cfg, res.Ledger); err != nil {
		return Phase{}, nil, err
	}
	p.ReplaysCPU = cpuBetween(before, sampleCPU(pid), p.Replays.Commands)
	return p, res.Ledger, nil
}

// cpuWindow samples the processor use at the ends of the measured window: after the warm-up
// and the duration, or, with --orders, from now until runCtx ends.
func (cmd *runCmd) cpuWindow(runCtx context.Context, pid int) <-chan [2]cpuSample {
	window := make(chan [2]cpuSample, 1)
	go func() {
		var w [2]cpuSample
		if cmd.Orders == 0 {
			sleepCtx(runCtx, cmd.Warmup)
			w[0] = sampleCPU(pid)
			sleepCtx(runCtx, cmd.Duration)
			w[1] = sampleCPU(pid)
		} else {
			w[0] = sampleCPU(pid)
			<-runCtx.Done()
			w[1] = sampleCPU(pid)
		}
		window <- w
	}()
	return window
}

func (cmd *runCmd) config(url string, baseline bool) load.Config {
	return load.Config{
		URL: func() string { return url }, Token: cmd.Token,
		Clients: cmd.Clients, Orders: cmd.Orders, Duration: cmd.Duration, Warmup: cmd.Warmup,
		RetryShare: cmd.RetryShare, Deliveries: cmd.Deliveries,
		CancelShare: cmd.CancelShare, FailShare: cmd.FailShare, RefundShare: cmd.RefundShare,
		Seed: cmd.Seed, Baseline: baseline,
	}
}

// phase runs the lifecycles, then replays every acknowledged command.
// The processor use of the window is sampled at its ends, and the server's projection lag
// over it; with --orders the window is the run.
func (cmd *runCmd) phase(ctx context.Context, url string, pid int, baseline bool, say func(string, ...any)) (Phase, *load.Ledger, error) {
	cfg := cmd.config(url, baseline)
	name := map[bool]string{true: "baseline", false: "server"}[baseline]
	say("%s: %d clients, lifecycles for %v after %v of warm-up", name, cmd.Clients, cmd.Duration, cmd.Warmup)
	runCtx, cancel := context.WithCancel(ctx)
	runCfg := cfg
	lagged := make(chan *Lag, 1)
	if baseline {
		lagged <- nil
	} else {
		watch := &ackWatch{next: load.NewTransport(cmd.Clients)}
		runCfg.Transport = watch
		go func() {
			stop := runCtx
			if cmd.Orders == 0 {
				sleepCtx(runCtx, cmd.Warmup)
				var end context.CancelFunc
				stop, end = context.WithTimeout(runCtx, cmd.Duration)
				defer end()
			}
			l := probeLag(ctx, stop.Done(), url, cmd.Token, watch)
			lagged <- &l
		}()
	}
	window := cmd.cpuWindow(runCtx, pid)
	start := time.Now()
	res, err := load.Run(ctx, runCfg)
	cancel()
	w, lag := <-window, <-lagged
	if err != nil {
		return Phase{}, nil, err
	}
	p := Phase{Commands: res.Stats, CommandsCPU: cpuBetween(w[0], w[1], res.Stats.Commands), CommandsLag: lag,
		window: [2]time.Time{start, time.Now()}}
	if cmd.Orders == 0 {
		p.window = [2]time.Time{start.Add(cmd.Warmup), start.Add(cmd.Warmup + cmd.Duration)}
	}
	say("%s: %.0f commands/s; replaying %d acknowledged commands once it is idle (after %v)", name, res.Stats.CommandsPerSecond(),
		len(res.Ledger.Commands()), awaitQuiet(ctx, pid, quietAtMost).Round(time.Millisecond))
	before := sampleCPU(pid)
	if p.Replays, err = load.Replay(ctx, cfg, res.Ledger); err != nil {
		return Phase{}, nil, err
	}
	p.ReplaysCPU = cpuBetween(before, sampleCPU(pid), p.Replays.Commands)
	return p, res.Ledger, nil
}

// report prints the figures of a run, its targets and its verdict.
func report(w io.Writer, f Figures) {
	c := f.Config
	fmt.Fprintf(w, "%d clients, %v per phase after %v warm-up, seed %d; retry share %.2f, %d deliveries per payment, cancel %.2f, fail %.2f, refund %.2f\n",
		c.Clients, c.Duration, c.Warmup, c.Seed, c.RetryShare, c.Deliveries, c.CancelShare, c.FailShare, c.RefundShare)
	m := f.Machine
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs (%s), %s, commit %s\n\n", m.OS, m.Arch, m.CPUs, m.CPU, m.Go, m.Commit)
	reportPhases(w, f)
	if f.Creates != nil {
		reportCreates(w, *f.Creates)
		if m := f.Creates.Medians; m != nil {
			reportPairs(w, f.Creates.Pairs, *m)
		}
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
	fmt.Fprintln(tw, "processor use (cores)\ttarget\tharness\tother processes\tstolen\tidle\ttarget time per command\t")
	cpu := func(phase, target string, c CPU) {
		fmt.Fprintf(tw, "%s %s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%v\t\n", phase, target, c.Target, c.Harness, c.Others, c.Stolen, c.Idle, c.TargetPerCommand.Round(time.Microsecond))
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
	met := func(ok bool) string { return map[bool]string{true: "met", false: "MISSED"}[ok] }
	if f.Ratios != nil {
		fmt.Fprintf(w, "commands/s vs baseline: %.3f (target ≥ %.2f: %s)\n", f.Ratios.Commands, targetCommands, met(*f.Targets.Commands))
		fmt.Fprintf(w, "replays/s vs baseline:  %.3f (target ≥ %.2f: %s)\n", f.Ratios.Replays, targetReplays, met(*f.Targets.Replays))
	}
	fmt.Fprintf(w, "command p99:            %v (target ≤ %v: %s)\n", round(f.Server.Commands.Latency.P99), targetP99, met(f.Targets.P99))
	if l := f.Server.CommandsLag; l != nil {
		fmt.Fprintf(w, "projection lag p99:     %v, max %v of %d samples, %d failed (target: max ≤ %v, none failed: %s)\n",
			round(l.P99), round(l.Max), l.Samples, l.Failed, targetLag, met(f.Targets.Lag))
	}
	if c := f.Creates; c != nil {
		r, p99, of := c.VsYardstick, c.Server.Commands.Latency.P99, ""
		if m := c.Medians; m != nil {
			r, p99, of = &m.Ratios, m.P99, fmt.Sprintf(", median of %d paired windows", len(c.Pairs))
		}
		if r != nil {
			fmt.Fprintf(w, "creates/s vs yardstick: %.3f (target ≥ %.2f: %s%s)\n", r.Creates, targetCreates, met(*f.Targets.Creates), of)
			fmt.Fprintf(w, "CPU/create vs yardstick: %.2f× (target ≤ %.0f×: %s%s)\n", r.CPUPerCreate, targetCreateCPU, met(*f.Targets.CreateCPU), of)
		}
		fmt.Fprintf(w, "create p99:             %v (target ≤ %v: %s%s)\n", round(p99), targetCreateP99, met(*f.Targets.CreateP99), of)
	}
}

// reportVerdict prints the checks of the ledgers, every problem and error found, and the verdict.
func reportVerdict(w io.Writer, f Figures) {
	v := f.Verify
	fmt.Fprintf(w, "ledger: %d orders, %d commands acknowledged (%d unanswered), %d events: %d lost, %d duplicated, %d mismatched, %d phantom\n",
		v.Orders, v.Commands, v.Unknown, v.Events, v.Lost, v.Duplicated, v.Mismatched, v.Phantoms)
	fmt.Fprintf(w, "replays identical to the first answer: %d of %d\n", f.Server.Replays.Commands-f.Server.Replays.Errors, f.Server.Replays.Commands)
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
	fmt.Fprintln(tw, "keyed creates\ttarget\tper second\tp50\tp99\treplays\terrors\ttarget cores\tother cores\tstolen\ttarget time per create\t")
	row := func(phase, target string, s load.Stats, cpu CPU) {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%d\t%d\t%.2f\t%.2f\t%.2f\t%v\t\n", phase, target, s.CommandsPerSecond(),
			round(s.Latency.P50), round(s.Latency.P99), s.Replays, s.Errors, cpu.Target, cpu.Harness+cpu.Others, cpu.Stolen, cpu.TargetPerCommand.Round(time.Microsecond))
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
