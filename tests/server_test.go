package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/internal/syncbuf"
)

const (
	startTimeout = 30 * time.Second // until the listening line; generous for -race on small machines
	stopTimeout  = 30 * time.Second // from SIGTERM to exit
)

// server is one data directory served by the real binary. The process can be stopped,
// killed and started again on the same directory; its address changes on every start.
type server struct {
	dir  string   // --data
	args []string // extra flags, kept across restarts
	env  []string // extra environment (KEY=value) for the next start
	// patience replaces requestTimeout for this server's requests, where a test's point is
	// what the answers are and not how soon they come (a storm of hundreds at once).
	patience time.Duration

	mu      sync.Mutex
	base    string // http://127.0.0.1:PORT of the running process
	proc    *process
	clients map[testing.TB]*http.Client
}

// startServer serves dir (a fresh t.TempDir() if dir is "") with extra flags args.
func startServer(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s := &server{dir: dir, args: args}
	s.start(t)
	return s
}

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	stdout *lineWatcher
	stderr *syncbuf.Buffer
	exited chan struct{} // closed once cmd.Wait has returned
	state  *os.ProcessState
	err    error // cmd.Wait's error
}

// start runs the binary on s.dir and waits for its listening line. t.Cleanup stops it with
// SIGTERM if it still runs then, and fails t if it does not exit cleanly.
func (s *server) start(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	running := s.proc != nil && !s.proc.done()
	s.mu.Unlock()
	if running {
		t.Fatal("start: the server is already running")
	}

	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", s.dir}, s.args...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(hermeticEnv(), s.env...)
	p := &process{
		cmd:    cmd,
		stdout: newLineWatcher("listening on "),
		stderr: new(syncbuf.Buffer),
		exited: make(chan struct{}),
	}
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		if !p.done() {
			p.stop(t)
		}
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the server reported a data race:\n%s", p.stderr.String())
		}
		if t.Failed() {
			t.Logf("server %s stderr (tail):\n%s", strings.Join(args, " "), tail(p.stderr.String(), 8<<10))
		}
	})

	var line string
	select {
	case line = <-p.stdout.found:
	case <-p.exited:
		t.Fatalf("server did not print its listening line: it exited (%v); stdout: %q; stderr: %s",
			p.err, p.stdout.String(), tail(p.stderr.String(), 4<<10))
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-p.exited
		t.Fatalf("server did not print its listening line within %v; stdout: %q; stderr: %s",
			startTimeout, p.stdout.String(), tail(p.stderr.String(), 4<<10))
	}
	base := strings.TrimPrefix(line, "listening on ")
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("listening line %q does not name http://127.0.0.1:PORT", line)
	}

	s.mu.Lock()
	s.proc = p
	s.base = strings.TrimSuffix(base, "/")
	s.mu.Unlock()
	s.client(t) // made here, on the test's goroutine: apitest may fail t while loading the document
}

// hermeticEnv is the test's environment without the server's own API_* variables, so a
// developer's shell cannot change what the tests run against.
func hermeticEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "API_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// kill sends SIGKILL and waits: a crash, as far as the data directory can tell.
func (s *server) kill(t *testing.T) {
	t.Helper()
	p := s.current()
	if err := p.cmd.Process.Kill(); err != nil && !p.done() {
		t.Fatalf("kill server: %v", err)
	}
	p.wait(t, stopTimeout)
}

// restart stops the server if it still runs and starts it again on the same directory, with
// s.args and s.env as they are now.
func (s *server) restart(t *testing.T) {
	t.Helper()
	if p := s.current(); !p.done() {
		p.stop(t)
	}
	s.start(t)
}

// signal sends sig to the running process without waiting.
func (s *server) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.current().cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit on its own and returns how it ended.
func (s *server) wait(t *testing.T, timeout time.Duration) *os.ProcessState {
	t.Helper()
	return s.current().wait(t, timeout)
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *process) stop(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.done() {
		t.Errorf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("server did not exit within %v of SIGTERM; killed it", stopTimeout)
		return
	}
	if p.err != nil {
		t.Errorf("server did not exit cleanly after SIGTERM: %v; stderr: %s", p.err, tail(p.stderr.String(), 4<<10))
	}
}

func (p *process) wait(t testing.TB, timeout time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-p.exited:
		return p.state
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("server did not exit within %v; killed it", timeout)
		return nil
	}
}

// killedBy reports whether the process ended by signal sig.
func killedBy(st *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// lineWatcher is the server's stdout: it keeps everything and reports the first line that
// starts with prefix.
type lineWatcher struct {
	prefix string
	found  chan string // receives the matching line once

	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int // bytes of buf already searched for complete lines
	matched bool
}

func newLineWatcher(prefix string) *lineWatcher {
	return &lineWatcher{prefix: prefix, found: make(chan string, 1)}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for !w.matched {
		rest := w.buf.Bytes()[w.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(rest[:i]), "\r")
		w.scanned += i + 1
		if strings.HasPrefix(line, w.prefix) {
			w.matched = true
			w.found <- line
		}
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("[… %d bytes before]\n%s", len(s)-n, s[len(s)-n:])
}
