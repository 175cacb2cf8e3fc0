package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"text/tabwriter"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Bounds of --open-loop's flags: each rate is two windows (the yardstick's and the server's) of
// --warmup and --duration, and each request in flight holds a connection.
const (
	maxRates       = 10
	maxRate        = 100_000
	maxRateWorkers = 10_000
	// maxErrorSamples bounds the error texts a window keeps: the errors are counted, and a few
	// show what they were.
	maxErrorSamples = 5
	// maxAnswerBytes bounds what is read of an answer: a create's is a few hundred bytes, and
	// the body is not checked.
	maxAnswerBytes = 16 << 10
)

// OpenLoop is --open-loop: keyed creates offered at fixed rates, to the yardstick and then the
// server at each rate.
type OpenLoop struct {
	Rates []OpenRate `json:"rates"`
}

// OpenRate is one offered rate: the yardstick's window and the server's.
type OpenRate struct {
	Rate      int         `json:"offeredPerSecond"`
	Yardstick *RateWindow `json:"yardstick,omitempty"` // none with --no-yardstick
	Server    RateWindow  `json:"server"`
	// P99VsYardstick is the server's p99 divided by the yardstick's; 0 where either is unknown.
	P99VsYardstick float64 `json:"p99VsYardstick"`
}

// RateWindow is one target's measured window at a fixed offered rate, the requests sent in the
// warm-up before it left out.
type RateWindow struct {
	Sent     uint64  `json:"sent"`
	SentRate float64 `json:"sentPerSecond"` // below the offered rate once --rate-workers all wait
	Created  uint64  `json:"created"`       // answered 2xx
	// Achieved is the creates per second, from the first request sent to the last answer.
	Achieved float64 `json:"achievedPerSecond"`
	// Errors are the answers other than 2xx, the timeouts (--rate-timeout) and the transport
	// errors; Samples the first few of them.
	Errors  uint64        `json:"errors"`
	Samples []string      `json:"samples,omitempty"`
	P50     time.Duration `json:"p50Ns"`
	P99     time.Duration `json:"p99Ns"`
	Max     time.Duration `json:"maxNs"`
	CPU     CPU           `json:"cpu"` // per create answered 2xx
}

// validateOpenLoop refuses --open-loop's flags out of their bounds.
func (cmd *runCmd) validateOpenLoop() error {
	if !cmd.OpenLoop {
		return nil
	}
	if len(cmd.Rates) == 0 || len(cmd.Rates) > maxRates {
		return fmt.Errorf("--rates: want 1 to %d rates, not %d", maxRates, len(cmd.Rates))
	}
	for _, r := range cmd.Rates {
		if r < 1 || r > maxRate {
			return fmt.Errorf("--rates %d: want 1 to %d creates per second", r, maxRate)
		}
	}
	if cmd.RateWorkers < 1 || cmd.RateWorkers > maxRateWorkers {
		return fmt.Errorf("--rate-workers %d: want 1 to %d", cmd.RateWorkers, maxRateWorkers)
	}
	if cmd.RateTimeout <= 0 {
		return fmt.Errorf("--rate-timeout %v: want a positive duration", cmd.RateTimeout)
	}
	return nil
}

// openLoop runs --open-loop against the server at url (process pid), beside a yardstick of its
// own on a fresh file, kept running (an idle target takes no processor time) and removed after.
func (cmd *runCmd) openLoop(ctx context.Context, dir, url string, pid int, say func(string, ...any)) (*OpenLoop, error) {
	var y *child
	if cmd.Yardstick {
		ydir, err := os.MkdirTemp(dir, "yardstick-open-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(ydir)
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		if y, err = startChild(ctx, ydir, "yardstick", self, "serve-yardstick", "--data", filepath.Join(ydir, "yardstick.db")); err != nil {
			return nil, err
		}
		say("yardstick for the open loop at %s", y.url)
	}
	o, err := cmd.runRates(ctx, y, url, pid, say)
	if y != nil {
		if stopErr := y.stop(); err == nil {
			err = stopErr
		}
	}
	return o, err
}

// runRates runs each rate's windows: the yardstick's (if any), then the server's, each once the
// other target is idle.
func (cmd *runCmd) runRates(ctx context.Context, y *child, url string, pid int, say func(string, ...any)) (*OpenLoop, error) {
	o := &OpenLoop{}
	for _, rate := range cmd.Rates {
		r := OpenRate{Rate: rate}
		awaitQuiet(ctx, pid, quietAtMost)
		if y != nil {
			w, err := cmd.rateWindow(ctx, "yardstick", y.url, y.cmd.Process.Pid, rate, say)
			if err != nil {
				return nil, err
			}
			r.Yardstick = &w
			awaitQuiet(ctx, y.cmd.Process.Pid, quietAtMost)
		}
		var err error
		if r.Server, err = cmd.rateWindow(ctx, "server", url, pid, rate, say); err != nil {
			return nil, err
		}
		if r.Yardstick != nil {
			r.P99VsYardstick = ratio(float64(r.Server.P99), float64(r.Yardstick.P99))
		}
		o.Rates = append(o.Rates, r)
	}
	return o, nil
}

// rateWindow offers keyed creates to url at rate for --warmup and then --duration, in one
// attack so that the measured window starts on warm connections, and summarises the requests
// sent in the window. The target's processor time and disk writes are read at its ends.
func (cmd *runCmd) rateWindow(ctx context.Context, name, url string, pid, rate int, say func(string, ...any)) (RateWindow, error) {
	say("%s: %d keyed creates/s offered for %v after %v of warm-up (open loop, at most %d in flight)",
		name, rate, cmd.Duration, cmd.Warmup, cmd.RateWorkers)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := timedWindow(runCtx, pid, cmd.Warmup, cmd.Duration)
	s := attack(ctx, cmd.attacker(), createTargeter(url, cmd.Token, fmt.Sprintf("%s-rate%d-%x", name, rate, rand.Uint32())),
		rate, cmd.Warmup, cmd.Duration)
	w := <-window
	if err := ctx.Err(); err != nil {
		return RateWindow{}, err
	}
	rw := s.window()
	rw.CPU = cpuBetween(w[0], w[1], int(rw.Created))
	say("%s: %d/s offered, %.0f/s sent, %.0f creates/s, p99 %v, %d errors", name, rate, rw.SentRate, rw.Achieved, round(rw.P99), rw.Errors)
	return rw, nil
}

// attacker is a vegeta attacker as --open-loop's flags say. Its workers, each one request in
// flight on a connection of its own, are bounded by --rate-workers.
func (cmd *runCmd) attacker() *vegeta.Attacker {
	return vegeta.NewAttacker(vegeta.Workers(uint64(min(cmd.RateWorkers, 64))), vegeta.MaxWorkers(uint64(cmd.RateWorkers)),
		vegeta.Connections(cmd.RateWorkers), vegeta.Timeout(cmd.RateTimeout), vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(maxAnswerBytes), vegeta.KeepAlive(true))
}

// attack offers tr's requests at rate for warmup and then d, and summarises the requests sent
// after the warm-up. It returns once every request is answered or has timed out, or ctx ends.
func attack(ctx context.Context, a *vegeta.Attacker, tr vegeta.Targeter, rate int, warmup, d time.Duration) *rateSummary {
	stop := context.AfterFunc(ctx, func() { a.Stop() })
	defer stop()
	from := time.Now().Add(warmup)
	s := &rateSummary{}
	for r := range a.Attack(tr, vegeta.Rate{Freq: rate, Per: time.Second}, warmup+d, "") {
		if !r.Timestamp.Before(from) {
			s.add(r)
		}
	}
	s.m.Close()
	return s
}

// createTargeter returns keyed creates with the body that wrk_creates.lua sends, each under an
// Idempotency-Key of its own (run, then a count). vegeta's workers call it concurrently.
func createTargeter(url, token, run string) vegeta.Targeter {
	var n atomic.Uint64
	header := http.Header{"Content-Type": {"application/json"}}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	return func(t *vegeta.Target) error {
		key := fmt.Sprintf("%s-%d", run, n.Add(1))
		t.Method, t.URL, t.Body = http.MethodPost, url+"/v1/orders", createBody(key)
		t.Header = header.Clone()
		t.Header.Set("Idempotency-Key", key)
		return nil
	}
}

// createBody is the create that wrk_creates.lua sends under key.
func createBody(key string) []byte {
	return fmt.Appendf(nil, `{"customerId":"cust-%s","currency":"EUR","lines":[{"sku":"sku-1","quantity":1,"unitPrice":100}],"clientReference":"%s"}`, key, key)
}

// rateSummary folds the results of an attack as they come. vegeta's Metrics keep a t-digest of
// the latencies, not the results, so a window holds as little at 10,000 requests/s as at 10;
// each error's text is dropped before it reaches them (they keep every distinct text, and a
// transport error names a port), after the first few are sampled here.
type rateSummary struct {
	m       vegeta.Metrics
	errors  uint64
	samples []string
}

func (s *rateSummary) add(r *vegeta.Result) {
	if r.Code < 200 || r.Code > 299 || r.Error != "" {
		s.errors++
		if len(s.samples) < maxErrorSamples {
			msg := r.Error
			if msg == "" {
				msg = fmt.Sprintf("answered %d", r.Code)
			}
			s.samples = append(s.samples, msg)
		}
	}
	r.Error, r.Body = "", nil
	s.m.Add(r)
}

// window is the summary as a window's figures, once the metrics are closed.
func (s *rateSummary) window() RateWindow {
	m := &s.m
	w := RateWindow{Sent: m.Requests, SentRate: m.Rate, Created: m.Requests - s.errors, Errors: s.errors, Samples: s.samples,
		P50: m.Latencies.P50, P99: m.Latencies.P99, Max: m.Latencies.Max}
	if span := m.End.Sub(m.Earliest).Seconds(); span > 0 {
		w.Achieved = float64(w.Created) / span
	}
	return w
}

// reportOpenLoop prints each rate's windows, and the server's p99 as a ratio to the yardstick's.
func reportOpenLoop(w io.Writer, c runCmd, o OpenLoop) {
	fmt.Fprintf(w, "keyed creates at fixed offered rates (open loop, vegeta; %v each after %v of warm-up; at most %d in flight, %v timeout)\n",
		c.Duration, c.Warmup, c.RateWorkers, c.RateTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered/s\ttarget\tsent/s\tcreates/s\tp50\tp99\tmax\terrors\ttarget cores\ttarget time per create\ttarget disk writes per create\tp99 vs yardstick\t")
	row := func(rate int, target string, r RateWindow, vs string) {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%v\t%v\t%v\t%d\t%.2f\t%v\t%.0f B\t%s\t\n", rate, target, r.SentRate, r.Achieved,
			round(r.P50), round(r.P99), round(r.Max), r.Errors, r.CPU.Target, r.CPU.TargetPerCommand.Round(time.Microsecond), r.CPU.TargetWrittenPerCommand, vs)
	}
	for _, r := range o.Rates {
		if r.Yardstick != nil {
			row(r.Rate, "yardstick", *r.Yardstick, "")
		}
		vs := "-"
		if r.P99VsYardstick > 0 {
			vs = fmt.Sprintf("%.2f×", r.P99VsYardstick)
		}
		row(r.Rate, "server", r.Server, vs)
	}
	tw.Flush()
	for _, r := range o.Rates {
		if r.Yardstick != nil {
			for _, e := range r.Yardstick.Samples {
				fmt.Fprintf(w, "  %d/s, yardstick, error: %s\n", r.Rate, e)
			}
		}
		for _, e := range r.Server.Samples {
			fmt.Fprintf(w, "  %d/s, server, error: %s\n", r.Rate, e)
		}
	}
	fmt.Fprintln(w, "(the open loop's errors are reported, not judged: a rate past what a target serves times out by design)")
	fmt.Fprintln(w)
}
