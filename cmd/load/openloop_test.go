package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The open loop sends what wrk sends: its body is the script's, with the key in both places.
func TestCreateBodyIsWrksBody(t *testing.T) {
	_, rest, ok := strings.Cut(string(wrkCreates), "local body = '")
	lua, _, _ := strings.Cut(rest, "'\n")
	if !ok || lua == "" {
		t.Fatal("wrk_creates.lua has no line local body = '…'")
	}
	want := strings.ReplaceAll(lua, "' .. key .. '", "run-1-7")
	if got := string(createBody("run-1-7")); got != want {
		t.Errorf("createBody = %s\nwrk sends  %s", got, want)
	}
}

// An attack offers its rate whatever the answers, each create under a key of its own, and
// summarises only the requests sent after the warm-up: answers other than 2xx and timeouts
// are errors, a few of them sampled.
func TestAttackSummarisesTheWindow(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		var body struct{ ClientReference string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ClientReference != key || r.URL.Path != "/v1/orders" ||
			r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen := keys[key]
		keys[key] = true
		n := len(keys)
		mu.Unlock()
		switch {
		case seen:
			http.Error(w, "key sent twice", http.StatusConflict)
		case n%10 == 0:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case n%10 == 5:
			time.Sleep(300 * time.Millisecond) // past the timeout
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	cmd := &runCmd{RateWorkers: 50, RateTimeout: 100 * time.Millisecond}
	s := attack(t.Context(), cmd.attacker(), createTargeter(srv.URL, "tok", "test"), 200, 100*time.Millisecond, 400*time.Millisecond)
	w := s.window()
	mu.Lock()
	sent := len(keys)
	mu.Unlock()
	if w.Sent < 60 || w.Sent > 100 || int(w.Sent) >= sent {
		t.Errorf("summarised %d of %d requests; want about 80 (200/s for 400 ms), not the warm-up's", w.Sent, sent)
	}
	if w.Errors < w.Sent/10 || w.Errors > w.Sent/3 || w.Created != w.Sent-w.Errors || len(w.Samples) != maxErrorSamples {
		t.Errorf("%d sent, %d created, %d errors %q; want a fifth errors (503s and timeouts), %d sampled",
			w.Sent, w.Created, w.Errors, w.Samples, maxErrorSamples)
	}
	if w.P50 <= 0 || w.P99 < w.P50 || w.Max < w.P99 || w.Max > time.Second || w.Achieved <= 0 || w.SentRate < 100 {
		t.Errorf("window %+v", w)
	}
}

// An attack ends when its context does, with what it had sent.
func TestAttackStopsWithItsContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	cmd := &runCmd{RateWorkers: 10, RateTimeout: time.Second}
	s := attack(ctx, cmd.attacker(), createTargeter(srv.URL, "", "stop"), 100, 0, time.Minute)
	if took := time.Since(start); took > 5*time.Second || s.window().Sent == 0 {
		t.Errorf("attack of a minute took %v and sent %d after its context ended", took, s.window().Sent)
	}
}

func TestOpenLoopOptionsAreBounded(t *testing.T) {
	for _, args := range [][]string{
		{"--open-loop", "--rates", "0"},
		{"--open-loop", "--rates", "100001"},
		{"--open-loop", "--rates", "1,2,3,4,5,6,7,8,9,10,11"},
		{"--open-loop", "--rate-workers", "0"},
		{"--open-loop", "--rate-timeout", "0s"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append([]string{"run", "--url", "http://127.0.0.1:1", "--no-baseline"}, args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--rate") {
			t.Errorf("run %v: %v; want it refused", args, err)
		}
	}
}

// The report gives each rate's windows and the server's p99 against the yardstick's.
func TestReportOpenLoop(t *testing.T) {
	o := OpenLoop{Rates: []OpenRate{{
		Rate:           1000,
		Yardstick:      &RateWindow{Sent: 5000, SentRate: 1000, Created: 5000, Achieved: 1000, P99: 2 * time.Millisecond},
		Server:         RateWindow{Sent: 5000, SentRate: 1000, Created: 4999, Errors: 1, Samples: []string{"answered 503"}, P99: 5 * time.Millisecond},
		P99VsYardstick: 2.5,
	}}}
	var b bytes.Buffer
	reportOpenLoop(&b, runCmd{Duration: 5 * time.Second, RateWorkers: 1024, RateTimeout: 10 * time.Second}, o)
	for _, want := range []string{"yardstick", "2.50×", "1000/s, server, error: answered 503"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
