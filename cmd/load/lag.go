package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acme/orders/tests/load"
)

// Projection lag: how long after a command is acknowledged the orders read model
// answers it, sampled by one prober so that the measurement does not change the load.
const (
	lagEvery   = 100 * time.Millisecond // between the starts of two samples
	lagTimeout = 10 * time.Second       // a sample without a 200 by then failed
	lagErrors  = 10                     // failure messages kept
)

// Lag is how far the read models trailed the commands in the server's measured window.
type Lag struct {
	// Samples are GETs of the order of the most recent acknowledged command with
	// ?minPosition= its Log-Position, one at a time. Each lasts from when the client received
	// the command's answer to when the GET answered 200: one HTTP round trip is included.
	Samples int           `json:"samples"` // answered 200 in time
	Failed  int           `json:"failed"`  // transport errors, answers other than 200 and 503, timeouts
	P50     time.Duration `json:"p50Ns"`
	P99     time.Duration `json:"p99Ns"`
	Max     time.Duration `json:"maxNs"`
	Errors  []string      `json:"errors,omitempty"` // the first failures
	// Projections are the server's own view: the most each projection was behind in the
	// answers to GET /admin/projections, polled after each sample.
	Projections  []ProjectionLag `json:"projections"`
	StatusPolls  int             `json:"statusPolls"`
	StatusErrors int             `json:"statusErrors"`
	StatusError  string          `json:"statusError,omitempty"` // the first
}

// ProjectionLag is the most a projection was behind by its own account.
type ProjectionLag struct {
	Name          string  `json:"name"`
	MaxLagEvents  uint64  `json:"maxLagEvents"`
	MaxLagSeconds float64 `json:"maxLagSeconds"`
}

// met reports whether the lag target was met: every sample answered, the slowest within
// bound. A window without samples proves nothing and misses it.
func (l *Lag) met(bound time.Duration) bool {
	return l.Samples > 0 && l.Failed == 0 && l.Max <= bound
}

// ack is an acknowledged command, as the lag probe needs it.
type ack struct {
	order, position string
	at              time.Time // when its answer arrived
}

// ackWatch is the clients' transport, remembering the most recent acknowledged command:
// load.Run shows its ledger only when the run ends.
type ackWatch struct {
	next http.RoundTripper
	last atomic.Pointer[ack]
}

func (t *ackWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil || req.Method == http.MethodGet || res.StatusCode/100 != 2 || res.Header.Get("Idempotent-Replayed") == "true" {
		// A replay repeats an old Log-Position: timed from now, it would hide lag.
		return res, err
	}
	at := time.Now()
	pos := res.Header.Get("Log-Position")
	id := orderOf(req.URL.Path, res.Header.Get("Location"))
	if pos != "" && id != "" {
		t.last.Store(&ack{order: id, position: pos, at: at})
	}
	return res, err
}

// orderOf is the order id of a command from its path, or from the Location of a created
// order; "" for commands that name no order (a payment confirmed by its id alone).
func orderOf(path, location string) string {
	for _, p := range []string{location, path} {
		if _, rest, ok := strings.Cut(p, "/v1/orders/"); ok {
			if id, _, _ := strings.Cut(rest, "/"); id != "" {
				return id
			}
		}
	}
	return ""
}

// lagProbe samples the projection lag of a server.
type lagProbe struct {
	url, token string
	client     *http.Client

	times []time.Duration
	lag   Lag
	worst map[string]*ProjectionLag
}

// probeLag samples every lagEvery until stop is closed, and lets a sample under way finish.
// Requests end with ctx.
func probeLag(ctx context.Context, stop <-chan struct{}, url, token string, watch *ackWatch) Lag {
	p := &lagProbe{url: url, token: token, worst: map[string]*ProjectionLag{},
		client: &http.Client{Transport: load.NewTransport(1)}}
	tick := time.NewTicker(lagEvery)
	defer tick.Stop()
	var last *ack
	for {
		select {
		case <-stop:
			return p.summary()
		case <-ctx.Done():
			return p.summary()
		case <-tick.C:
		}
		if a := watch.last.Load(); a != nil && a != last {
			last = a
			p.sample(ctx, a)
		}
		p.poll(ctx)
	}
}

// sample times one read of a's order at a's position, retrying 503 (behind: the server
// already waited) until 200 or lagTimeout.
func (p *lagProbe) sample(ctx context.Context, a *ack) {
	target := p.url + "/v1/orders/" + url.PathEscape(a.order) + "?minPosition=" + url.QueryEscape(a.position)
	deadline := a.at.Add(lagTimeout)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		status, body, err := p.get(sctx, target)
		switch {
		case ctx.Err() != nil:
			return // the harness is stopping: not a sample
		case status == http.StatusOK:
			p.times = append(p.times, time.Since(a.at))
			return
		case err != nil && sctx.Err() != nil, status == http.StatusServiceUnavailable && time.Now().After(deadline):
			p.fail("order %s at %s: no 200 within %v", a.order, a.position, lagTimeout)
			return
		case err != nil:
			p.fail("order %s at %s: %v", a.order, a.position, err)
			return
		case status != http.StatusServiceUnavailable:
			p.fail("order %s at %s: %d %s", a.order, a.position, status, strings.TrimSpace(string(body)))
			return
		}
		sleepCtx(sctx, 10*time.Millisecond) // a failing projection answers 503 at once
	}
}

func (p *lagProbe) fail(format string, args ...any) {
	p.lag.Failed++
	if len(p.lag.Errors) < lagErrors {
		p.lag.Errors = append(p.lag.Errors, fmt.Sprintf(format, args...))
	}
}

// poll reads the server's view of its projections and keeps each one's worst lag.
func (p *lagProbe) poll(ctx context.Context) {
	status, body, err := p.get(ctx, p.url+"/admin/projections")
	if ctx.Err() != nil {
		return
	}
	p.lag.StatusPolls++
	var view struct {
		Projections []struct {
			Name       string  `json:"name"`
			LagEvents  uint64  `json:"lagEvents"`
			LagSeconds float64 `json:"lagSeconds"`
		} `json:"projections"`
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("%d %s", status, strings.TrimSpace(string(body)))
	}
	if err == nil {
		err = json.Unmarshal(body, &view)
	}
	if err != nil {
		p.lag.StatusErrors++
		if p.lag.StatusError == "" {
			p.lag.StatusError = "GET /admin/projections: " + err.Error()
		}
		return
	}
	for _, s := range view.Projections {
		m := p.worst[s.Name]
		if m == nil {
			m = &ProjectionLag{Name: s.Name}
			p.worst[s.Name] = m
		}
		m.MaxLagEvents = max(m.MaxLagEvents, s.LagEvents)
		m.MaxLagSeconds = max(m.MaxLagSeconds, s.LagSeconds)
	}
}

// get sends a GET as the clients do, and reads the answer in full.
func (p *lagProbe) get(ctx context.Context, target string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	res, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, body, nil
}

// summary is the figures of the samples so far.
func (p *lagProbe) summary() Lag {
	l := p.lag
	lat := slices.Sorted(slices.Values(p.times))
	if n := len(lat); n > 0 {
		// The percentiles of package load: with ~10 samples a second, p99 of a short window
		// is close to its max.
		q := func(f float64) time.Duration { return lat[min(n-1, int(f*float64(n)))] }
		l.Samples, l.P50, l.P99, l.Max = n, q(0.50), q(0.99), lat[n-1]
	}
	l.Projections = []ProjectionLag{}
	for _, m := range p.worst {
		l.Projections = append(l.Projections, *m)
	}
	slices.SortFunc(l.Projections, func(a, b ProjectionLag) int { return strings.Compare(a.Name, b.Name) })
	return l
}
