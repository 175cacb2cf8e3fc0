package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// crashEvent is the data of every event the crash child appends: enough to tell which append
// an event belongs to, and whether that append is whole.
type crashEvent struct {
	Stream string `json:"stream"`
	Append int    `json:"append"` // the append's sequence number in its stream
	Index  int    `json:"index"`  // the event's place in the append
	Count  int    `json:"count"`  // events in the append
	Pad    string `json:"pad"`
}

// TestMain runs the test binary as the crash tests' child (crashChild) when they start it so,
// and the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CRASH_CHILD_DIR"); dir != "" {
		crashChild(dir, os.Getenv("CRASH_CHILD_PREFIX"))
		return
	}
	os.Exit(m.Run())
}

// crashChild appends in a loop from 8 writers, printing each acknowledged append, until it is
// killed.
func crashChild(dir, prefix string) {
	// The checkpointer copies the WAL at every tick at which it holds a frame not yet copied,
	// so that the longer rounds kill the child between and during copies too.
	s, err := sqlite.Open(dir, sqlite.Config{CheckpointFrames: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			stream := fmt.Sprintf("%s-%d", prefix, w)
			expected := eventstore.NoStream
			for k := 0; ; k++ {
				n := 1 + rand.IntN(4)
				events := make([]eventstore.EventData, n)
				for i := range events {
					data, _ := json.Marshal(crashEvent{stream, k, i, n, strings.Repeat("x", rand.IntN(2000))})
					events[i] = eventstore.EventData{ID: uuid.New(), Type: "crash.test.v1", Data: data}
				}
				res, err := s.Append(context.Background(), stream, expected, events...)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				expected = eventstore.Exact(res.Revision)
				out.Lock()
				fmt.Printf("ack %s %d %d %s\n", stream, res.Revision, n, events[0].ID)
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrash kills a child process that appends in a loop with SIGKILL at random moments, 10
// times on the same data directory (40 under ORDERS_SOAK, which .ci/run sets for its soak), and
// checks after each crash that every acknowledged append is stored whole and that no append is
// half written. Every fifth round lasts long enough for the checkpointer to copy the WAL and
// start it over.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 10 child processes")
	}
	rounds := 10
	if os.Getenv("ORDERS_SOAK") != "" {
		rounds = 40
	}
	dir := t.TempDir()
	for round := range rounds {
		prefix := fmt.Sprintf("crash%02d", round)
		d := time.Duration(20+rand.IntN(200)) * time.Millisecond
		if round%5 == 4 {
			d = time.Duration(1100+rand.IntN(1000)) * time.Millisecond
		}
		acked := runAndKill(t, dir, prefix, d)

		s, err := sqlite.Open(dir, sqlite.Config{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		checkWhole(t, s, prefix, acked)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// What a killed process left in the WAL is copied into the database file as soon as the next
// process writes, rather than 5 s or 20,000 frames later: a server killed again and again would
// otherwise never copy it, and each start would read all of it again (the crash loop of
// tests/crashloop_test.go saw the WAL grow to 140 MB over 40 kills, and each start slow down
// from 65 to 320 ms).
func TestLeftoverWALIsCopiedAfterTheFirstWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	runAndKill(t, dir, "left", 300*time.Millisecond)
	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, sqlite.FileName))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	left := size()

	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	event := eventstore.EventData{ID: uuid.New(), Type: "crash.test.v1", Data: []byte(`{}`)}
	if _, err := s.Append(context.Background(), "after", eventstore.NoStream, event); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); size() == left; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is still %d bytes 3 s after the first write: the WAL left behind was not copied", left)
		}
	}
}

// ack is an append the child saw succeed.
type ack struct {
	stream   string
	revision uint64 // of its last event
	count    int
	firstID  uuid.UUID
}

// runAndKill starts the child, lets it append for about d, kills it and returns its acks.
func runAndKill(t *testing.T, dir, prefix string, d time.Duration) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CRASH_CHILD_DIR="+dir, "CRASH_CHILD_PREFIX="+prefix)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acks []ack
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Kill only once the child has acknowledged something, so every round tests a crash
	// during writes rather than during start-up.
	var kill <-chan time.Time
	for line := range lines {
		var a ack
		var id string
		if _, err := fmt.Sscanf(line, "ack %s %d %d %s", &a.stream, &a.revision, &a.count, &id); err != nil {
			continue // the test framework's own output
		}
		a.firstID = uuid.MustParse(id)
		acks = append(acks, a)
		if kill == nil {
			kill = time.After(d)
		}
		select {
		case <-kill:
			cmd.Process.Signal(syscall.SIGKILL)
			kill = make(chan time.Time) // never again
		default:
		}
	}
	err = cmd.Wait()
	if len(acks) == 0 {
		t.Fatalf("child acknowledged nothing: %v\n%s", err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended without SIGKILL: %v\n%s", err, stderr.String())
	}
	return acks
}

// checkWhole checks the streams of prefix: revisions contiguous, every append whole, every ack
// present with its first event id.
func checkWhole(t *testing.T, s *sqlite.Store, prefix string, acked []ack) {
	t.Helper()
	ctx := context.Background()
	ids := map[string]map[uint64]uuid.UUID{} // stream → revision → id
	for w := range 8 {
		stream := fmt.Sprintf("%s-%d", prefix, w)
		ids[stream] = map[uint64]uuid.UUID{}
		var want uint64
		var open *crashEvent // the append being read, until its last event
		for e, err := range s.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
			if err != nil {
				if errors.Is(err, eventstore.ErrStreamNotFound) && want == 0 {
					break
				}
				t.Fatalf("read %s: %v", stream, err)
			}
			if e.Revision != want {
				t.Fatalf("%s: revision %d where %d was expected", stream, e.Revision, want)
			}
			want++
			ids[stream][e.Revision] = e.ID
			var ce crashEvent
			if err := json.Unmarshal(e.Data, &ce); err != nil {
				t.Fatalf("%s@%d: data damaged: %v", stream, e.Revision, err)
			}
			if ce.Stream != stream {
				t.Fatalf("%s@%d: event of stream %q", stream, e.Revision, ce.Stream)
			}
			switch {
			case open == nil && ce.Index != 0, open != nil && (ce.Append != open.Append || ce.Index != open.Index+1):
				t.Fatalf("%s@%d: append %d event %d/%d out of place: an append is not whole", stream, e.Revision, ce.Append, ce.Index, ce.Count)
			}
			open = &ce
			if ce.Index == ce.Count-1 {
				open = nil
			}
		}
		if open != nil {
			t.Fatalf("%s: append %d has %d of %d events: half written", stream, open.Append, open.Index+1, open.Count)
		}
	}
	for _, a := range acked {
		first := a.revision + 1 - uint64(a.count)
		if got, ok := ids[a.stream][first]; !ok || got != a.firstID {
			t.Fatalf("acknowledged append %s@%d (%d events) lost after SIGKILL", a.stream, first, a.count)
		}
	}
	t.Logf("%s: %d acknowledged appends, all present", prefix, len(acked))
}
