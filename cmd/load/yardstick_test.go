package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/internal/testenv"
	"github.com/acme/orders/tests/load"
)

// The yardstick answers a keyed create after storing it in its SQLite file, and answers the
// same request again with the stored answer, marked as a replay.
func TestYardstickStoresKeyedCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "yardstick.db")
	ctx, cancel := context.WithCancel(t.Context())
	stdout, w := io.Pipe()
	var stderr bytes.Buffer
	served := make(chan error, 1)
	go func() {
		served <- run(ctx, []string{"serve-yardstick", "--data", path}, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("yardstick printed no address: %v (%s)", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))

	body := `{"customerId":"cust-1","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":300}]}`
	post := func() (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "key-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	first, firstBody := post()
	if first.StatusCode != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first create: %s %q %s; want 201, not replayed", first.Status, first.Header.Get("Idempotent-Replayed"), firstBody)
	}
	if !strings.Contains(firstBody, `"total":600`) {
		t.Errorf("first create answered %s; want total 600", firstBody)
	}
	again, againBody := post()
	if again.StatusCode != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" ||
		againBody != firstBody || again.Header.Get("Location") != first.Header.Get("Location") {
		t.Errorf("same create again: %s replayed %q, Location %q, %s; want 201, replayed, the first answer (Location %q, %s)",
			again.Status, again.Header.Get("Idempotent-Replayed"), again.Header.Get("Location"), againBody, first.Header.Get("Location"), firstBody)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve-yardstick: %v (%s)", err, stderr.String())
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	var stored, mode string
	if err := db.QueryRow(`SELECT count(*), max(body) FROM creates WHERE key = 'key-1'`).Scan(&rows, &stored); err != nil {
		t.Fatalf("read the yardstick's file: %v", err)
	}
	if rows != 1 || stored != firstBody {
		t.Errorf("file holds %d rows for key-1, body %s; want one, the first answer %s", rows, stored, firstBody)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q (%v); want wal", mode, err)
	}
}

// A reference with no figure (no window, or no process to read the time of, as with --url)
// leaves its ratio at 0: JSON has no NaN or infinity to write instead.
func TestCreateRatiosOfUnknownFiguresEncode(t *testing.T) {
	server := Phase{Commands: load.Stats{Commands: 10, Elapsed: time.Second}, CommandsCPU: CPU{TargetPerCommand: time.Millisecond}}
	for _, r := range []*CreateRatios{createRatios(server, Phase{}), createRatios(Phase{}, server)} {
		if *r != (CreateRatios{}) {
			t.Errorf("ratios with an unknown side: %+v; want zeros", *r)
		}
		if _, err := json.Marshal(Figures{Creates: &Creates{VsYardstick: r}}); err != nil {
			t.Errorf("encode the figures: %v", err)
		}
	}
}

// wrk's keyed creates reach the yardstick's file, and its retries are replayed, not stored
// again.
func TestWrkCreatesOnYardstick(t *testing.T) {
	testenv.LookPath(t, "wrk", "apt-get install wrk")
	path := filepath.Join(t.TempDir(), "yardstick.db")
	y, err := load.OpenYardstick(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(y.Handler())
	cmd := &runCmd{Clients: 4, Duration: time.Second, RetryShare: 0.5}
	p, err := cmd.wrkPhase(t.Context(), "yardstick", srv.URL, os.Getpid(), func(string, ...any) {})
	srv.Close()
	if cerr := y.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s := p.Commands
	if s.Commands == 0 || s.Errors != 0 || s.Requests != s.Commands+s.Replays+s.Conflicts {
		t.Fatalf("wrk: %d requests, %d creates, %d replays, %d conflicts, %d errors %v; want creates, no errors",
			s.Requests, s.Commands, s.Replays, s.Conflicts, s.Errors, s.Samples)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM creates`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	// wrk does not count the requests still in flight when it stops: one per connection.
	if rows < s.Commands || rows > s.Commands+cmd.Clients {
		t.Errorf("file holds %d creates; wrk saw %d answered as first creates, with %d connections", rows, s.Commands, cmd.Clients)
	}
}
