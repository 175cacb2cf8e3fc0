package load

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stats are the figures of one phase.
type Stats struct {
	Elapsed time.Duration `json:"elapsedNs"` // of the measured window
	// Commands are the distinct keyed commands acknowledged in the window: the work asked for.
	Commands int `json:"commands"`
	// Requests are the HTTP answers in the window: commands, their retries and duplicate
	// deliveries, replays.
	Requests   int     `json:"requests"`
	Replays    int     `json:"replays"`    // answers with Idempotent-Replayed: true
	Conflicts  int     `json:"conflicts"`  // 409 answers (in flight, concurrent modification)
	Errors     int     `json:"errors"`     // 5xx, unexpected answers, requests given up
	Unanswered int     `json:"unanswered"` // transport errors (a crashed server), retried
	Latency    Latency `json:"latency"`    // of every answer in the window
	// ByCommand splits the answers by command, first runs and replays apart: which of them
	// make the tail.
	ByCommand []CommandLatency `json:"byCommand,omitempty"`
	Samples   []string         `json:"errorSamples,omitempty"`
}

// CommandLatency are the answers to one command of the workload in a window.
type CommandLatency struct {
	Command  string  `json:"command"`
	Replayed bool    `json:"replayed"` // answers with Idempotent-Replayed: true
	Answers  int     `json:"answers"`
	Latency  Latency `json:"latency"`
}

// CommandsPerSecond is the rate of acknowledged commands.
func (s Stats) CommandsPerSecond() float64 { return rate(s.Commands, s.Elapsed) }

// RequestsPerSecond is the rate of answers.
func (s Stats) RequestsPerSecond() float64 { return rate(s.Requests, s.Elapsed) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Latency are percentiles of answer times.
type Latency struct {
	P50 time.Duration `json:"p50Ns"`
	P95 time.Duration `json:"p95Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %v  p95 %v  p99 %v  max %v", ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max))
}

func ms(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// maxSamples bounds the error messages kept.
const maxSamples = 20

// recorder collects what one worker saw. Its methods are safe for concurrent use: a worker's
// concurrent retries share it.
type recorder struct {
	mu      sync.Mutex
	answers []answer
	acks    []time.Time // of distinct commands
	errors  []time.Time
	unans   int
	samples []string
}

// answer is one HTTP answer.
type answer struct {
	command  string
	end      time.Time
	latency  time.Duration
	replayed bool
	conflict bool
}

func (r *recorder) request(command string, start, end time.Time, out reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers = append(r.answers, answer{command: command, end: end, latency: end.Sub(start), replayed: out.replayed(),
		conflict: out.status == http.StatusConflict})
}

func (r *recorder) ack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, time.Now())
}

func (r *recorder) unanswered() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unans++
}

func (r *recorder) fault(req request, out reply) {
	r.errorf("%v: %v", req, out)
}

func (r *recorder) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, time.Now())
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, fmt.Sprintf(format, args...))
	}
}

// stats merges recorders over the window [from, to].
func stats(recs []*recorder, from, to time.Time) Stats {
	s := Stats{Elapsed: to.Sub(from)}
	var lat []time.Duration
	type kind struct {
		command  string
		replayed bool
	}
	byKind := map[kind][]time.Duration{}
	in := func(t time.Time) bool { return !t.Before(from) && !t.After(to) }
	for _, r := range recs {
		r.mu.Lock()
		for _, a := range r.answers {
			if !in(a.end) {
				continue
			}
			s.Requests++
			lat = append(lat, a.latency)
			k := kind{a.command, a.replayed}
			byKind[k] = append(byKind[k], a.latency)
			if a.replayed {
				s.Replays++
			}
			if a.conflict {
				s.Conflicts++
			}
		}
		for _, t := range r.acks {
			if in(t) {
				s.Commands++
			}
		}
		// Errors count wherever they happened: a warm-up error is still an error.
		s.Errors += len(r.errors)
		s.Unanswered += r.unans
		for _, m := range r.samples {
			if len(s.Samples) < maxSamples {
				s.Samples = append(s.Samples, m)
			}
		}
		r.mu.Unlock()
	}
	s.Latency = percentiles(lat)
	for k, lat := range byKind {
		s.ByCommand = append(s.ByCommand, CommandLatency{Command: k.command, Replayed: k.replayed, Answers: len(lat), Latency: percentiles(lat)})
	}
	slices.SortFunc(s.ByCommand, func(a, b CommandLatency) int {
		if a.Command == b.Command && a.Replayed != b.Replayed {
			return map[bool]int{false: -1, true: 1}[a.Replayed]
		}
		return strings.Compare(a.Command, b.Command)
	})
	return s
}

// percentiles sorts lat and reads its percentiles.
func percentiles(lat []time.Duration) Latency {
	slices.Sort(lat)
	n := len(lat)
	if n == 0 {
		return Latency{}
	}
	q := func(p float64) time.Duration { return lat[min(n-1, int(p*float64(n)))] }
	return Latency{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: lat[n-1]}
}
