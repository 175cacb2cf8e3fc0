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
//
// Those clients are a closed loop: each sends its next request once the last is answered, so a
// slow target is offered less. --open-loop offers keyed creates at fixed rates instead (vegeta's
// pacer), to the yardstick and the server one after the other at each rate, so that a target's
// latency is what a request meets at that rate, and the server's p99 is given as a ratio to the
// yardstick's at the same rate. Every window reports the target's processor time and the bytes
// it caused to be written to disk (/proc/PID/io) per command.
//
// With two --bin builds the server's measured phases run against each in turn, --rounds times
// (ABAB…), each on a fresh data directory, and the report gives each measure's median of each
// build and the ratio B/A: both builds meet the machine's drift alike.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
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
	Bin         []string      `help:"Server binary to start; default: build ./cmd/api of this module. Twice (--bin A --bin B): measure the server's phases against A, then B, for --rounds rounds, each on a fresh data directory, and compare each measure's medians (B/A); the baseline's and yardstick's phases of --baseline are not run then."`
	Rounds      int           `default:"3" help:"Rounds of A then B with two --bin (1 to 20)."`
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
	Lifecycles  bool          `default:"true" negatable:"" help:"Measure order lifecycles on the baseline and the server, verified against the ledger."`
	Baseline    bool          `default:"true" negatable:"" help:"Measure the baseline and the yardstick first."`
	Yardstick   bool          `default:"true" negatable:"" help:"Measure the durable yardstick of keyed creates (skipped with --no-baseline too)."`
	Creates     bool          `default:"true" negatable:"" help:"Measure keyed creates alone on each target too, after its lifecycles."`
	Client      string        `default:"go" enum:"go,wrk" help:"Clients of the keyed creates: the workload's Go clients (answers checked, replayed and verified after) or wrk (its own retries only; must be installed)."`
	CreatePairs int           `help:"After the server's keyed creates, run this many paired windows of keyed creates (0 to 20), the yardstick's and then the server's, and judge the create targets on the medians of the pairs: a machine that drifts between two far-apart windows then moves both sides of each ratio alike."`
	OpenLoop    bool          `name:"open-loop" help:"After the server's other phases, offer keyed creates at each of --rates for --duration (after --warmup at that rate), to a fresh yardstick (unless --no-yardstick) and then the server: an open loop, whatever their answers' pace."`
	Rates       []int         `default:"1000,3000" help:"Offered rates of --open-loop, keyed creates per second (at most 10 rates of 1 to 100000)."`
	RateWorkers int           `default:"1024" help:"Requests in flight at most in --open-loop, each on a connection of its own; once all wait, the pacer waits too and the target is offered less than the rate (the report shows the rate sent)."`
	RateTimeout time.Duration `default:"10s" help:"How long a request of --open-loop waits for its answer before it counts as an error."`
	JSON        string        `help:"Write the figures as JSON to this file ('-' for stdout, instead of the table)."`
	CPUProfile  string        `name:"cpu-profile" help:"Write a CPU profile of the started server over the measured window of its lifecycles to this file (the server runs with --pprof-addr)."`
	Goals       goals         `embed:"" json:"targets"`
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

func (cmd *runCmd) Run(ctx context.Context, e *env) error {
	if err := cmd.validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "orders-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	say := func(format string, args ...any) { fmt.Fprintf(e.stderr, "load: "+format+"\n", args...) }
	if len(cmd.Bin) == 2 {
		return cmd.alternate(ctx, dir, e.stdout, say)
	}

	f := cmd.newFigures()
	if cmd.Baseline {
		if err := cmd.references(ctx, dir, &f, say); err != nil {
			return err
		}
	}
	var bin string
	if len(cmd.Bin) == 1 {
		bin = cmd.Bin[0]
	}
	if err := cmd.serveAndMeasure(ctx, dir, bin, "server", cmd.Data, &f, say); err != nil {
		return err
	}
	f.judge()
	if err := cmd.output(e.stdout, f); err != nil {
		return err
	}
	if !f.OK {
		return fmt.Errorf("the server lost, duplicated or mismatched commands, answered with errors, or delivered webhooks wrongly (see above)")
	}
	return nil
}

// validate refuses flags out of their bounds, and combinations that cannot run together.
func (cmd *runCmd) validate() error {
	switch {
	case cmd.Webhooks < 0 || cmd.Webhooks > maxWebhookEndpoints:
		return fmt.Errorf("--webhooks %d: want 0 to %d endpoints", cmd.Webhooks, maxWebhookEndpoints)
	case cmd.CreatePairs < 0 || cmd.CreatePairs > maxCreatePairs || cmd.CreatePairs > 0 && !cmd.Creates:
		return fmt.Errorf("--create-pairs %d: want 0 to %d pairs, with --creates", cmd.CreatePairs, maxCreatePairs)
	case !cmd.Lifecycles && (cmd.Webhooks > 0 || cmd.CPUProfile != ""):
		return fmt.Errorf("--webhooks and --cpu-profile watch the lifecycles: not with --no-lifecycles")
	case len(cmd.Bin) > 2:
		return fmt.Errorf("--bin given %d times: want one build, or two to compare", len(cmd.Bin))
	case cmd.Rounds < 1 || cmd.Rounds > maxRounds:
		return fmt.Errorf("--rounds %d: want 1 to %d", cmd.Rounds, maxRounds)
	case len(cmd.Bin) == 2 && (cmd.URL != "" || cmd.Data != "" || cmd.CPUProfile != ""):
		return fmt.Errorf("two --bin builds each start on a fresh data directory: not with --url, --data or --cpu-profile")
	}
	return cmd.validateOpenLoop()
}

// newFigures is the figures of a run before any phase.
func (cmd *runCmd) newFigures() Figures {
	f := Figures{Machine: machine(), Config: *cmd}
	if cmd.Creates {
		f.Creates = &Creates{}
	}
	return f
}

// serveAndMeasure starts the server bin (see startServer) unless --url names one, measures its
// phases into f, and stops it.
func (cmd *runCmd) serveAndMeasure(ctx context.Context, dir, bin, label, data string, f *Figures, say func(string, ...any)) error {
	url, pid := cmd.URL, 0 // pid unknown for --url: its time counts as the others'
	var srv *child
	var pprofAddr string
	var err error
	if url == "" {
		if srv, pprofAddr, err = cmd.startServer(ctx, dir, bin, label, data, say); err != nil {
			return err
		}
		url, pid = srv.url, srv.cmd.Process.Pid
	}
	hookCtx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	err = cmd.measure(ctx, hookCtx, dir, url, pid, pprofAddr, f, say)
	if srv != nil {
		if stopErr := srv.stop(); err == nil {
			err = stopErr
		}
	}
	return err
}

// startServer builds the service unless bin names it, and starts it on the data directory
// data, or on one in dir. pprofAddr is where it serves its profiles, with --cpu-profile.
func (cmd *runCmd) startServer(ctx context.Context, dir, bin, label, data string, say func(string, ...any)) (srv *child, pprofAddr string, err error) {
	if bin == "" {
		say("building ./cmd/api")
		if bin, err = buildServer(ctx, dir); err != nil {
			return nil, "", err
		}
	}
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
	if srv, err = startChild(ctx, dir, label, bin, args...); err != nil {
		return nil, "", err
	}
	say("%s at %s, data in %s", label, srv.url, data)
	return srv, pprofAddr, nil
}

// measure runs the server's phases against url into f: the lifecycles and their replays, the
// webhook deliveries, the check of the ledger, then the keyed creates and their paired windows,
// then the open loop. The webhook endpoints receive until hookCtx ends.
func (cmd *runCmd) measure(ctx, hookCtx context.Context, dir, url string, pid int, pprofAddr string, f *Figures, say func(string, ...any)) error {
	var err error
	if cmd.Lifecycles {
		err = cmd.measureLifecycles(ctx, hookCtx, url, pid, pprofAddr, f, say)
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
	if err == nil && cmd.OpenLoop {
		f.OpenLoop, err = cmd.openLoop(ctx, dir, url, pid, say)
	}
	return err
}

// measureLifecycles runs the server's lifecycles and their replays, the webhook deliveries and
// the check of the ledger into f.
func (cmd *runCmd) measureLifecycles(ctx, hookCtx context.Context, url string, pid int, pprofAddr string, f *Figures, say func(string, ...any)) error {
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
	f.Server = p
	return err
}

// output writes f as --json asks: the report, the JSON on standard output, or both, the JSON
// into a file.
func (cmd *runCmd) output(stdout io.Writer, f Figures) error {
	return cmd.write(stdout, f, func(w io.Writer) { report(w, f) })
}

// write writes the figures v as --json asks, text printing them as a report.
func (cmd *runCmd) write(stdout io.Writer, v any, text func(io.Writer)) error {
	switch cmd.JSON {
	case "":
		text(stdout)
	case "-":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	default:
		text(stdout)
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(cmd.JSON, append(b, '\n'), 0o644)
	}
	return nil
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
	if cmd.Lifecycles {
		var p Phase
		p, _, err = cmd.phase(ctx, b.url, b.cmd.Process.Pid, true, say)
		f.Baseline = &p
	}
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
	return replayAll(ctx, cfg, pid, p, res, "creates", name, say)
}

// cpuWindow samples the processor use at the ends of the measured window: after the warm-up
// and the duration, or, with --orders, from now until runCtx ends.
func (cmd *runCmd) cpuWindow(runCtx context.Context, pid int) <-chan [2]cpuSample {
	if cmd.Orders == 0 {
		return timedWindow(runCtx, pid, cmd.Warmup, cmd.Duration)
	}
	window := make(chan [2]cpuSample, 1)
	go func() {
		var w [2]cpuSample
		w[0] = sampleCPU(pid)
		<-runCtx.Done()
		w[1] = sampleCPU(pid)
		window <- w
	}()
	return window
}

// timedWindow samples the processor use after warmup and again after d more, or sooner if
// runCtx ends.
func timedWindow(runCtx context.Context, pid int, warmup, d time.Duration) <-chan [2]cpuSample {
	window := make(chan [2]cpuSample, 1)
	go func() {
		var w [2]cpuSample
		sleepCtx(runCtx, warmup)
		w[0] = sampleCPU(pid)
		sleepCtx(runCtx, d)
		w[1] = sampleCPU(pid)
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
	return replayAll(ctx, cfg, pid, p, res, "commands", name, say)
}

// replayAll replays every command res acknowledged, once the target at pid is idle, into p.
func replayAll(ctx context.Context, cfg load.Config, pid int, p Phase, res *load.Result, what, name string, say func(string, ...any)) (Phase, *load.Ledger, error) {
	say("%s: %.0f %s/s; replaying %d acknowledged %s once it is idle (after %v)", name, res.Stats.CommandsPerSecond(), what,
		len(res.Ledger.Commands()), what, awaitQuiet(ctx, pid, quietAtMost).Round(time.Millisecond))
	before := sampleCPU(pid)
	var err error
	if p.Replays, err = load.Replay(ctx, cfg, res.Ledger); err != nil {
		return Phase{}, nil, err
	}
	p.ReplaysCPU = cpuBetween(before, sampleCPU(pid), p.Replays.Commands)
	return p, res.Ledger, nil
}
