package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ServiceURL is the base URL of the service that TestMain started for the examples: the real
// binary in development mode, on a fresh data directory, shared by every test that needs no
// service of its own.
var ServiceURL string

// serviceBin is the binary TestMain built from ./cmd/api; tests start more services from it.
var serviceBin string

// TestMain builds ./cmd/api once and starts it for the examples, which go test runs even with
// -short, and stops it when the tests end.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orders-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if serviceBin, err = buildService(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	svc, err := startService(serviceBin, filepath.Join(dir, "data"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer svc.stop()
	ServiceURL = svc.url
	m.Run() // returning from TestMain exits with m.Run's code, after the deferred calls
}

// moduleRoot walks up from the working directory to the directory of go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// buildService builds ./cmd/api into dir and returns the binary's path.
func buildService(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "api")
	build := exec.Command("go", "build", "-o", bin, "./cmd/api")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/api: %v\n%s", err, out)
	}
	return bin, nil
}

// service is a running server process.
type service struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	stderr bytes.Buffer // read only after exited is closed
}

// startService serves the data directory data with bin in development mode on a free loopback
// port, and returns once it listens.
func startService(bin, data string) (*service, error) {
	s := &service{cmd: exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data), exited: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "API_") { // a developer's settings must not change the server
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }() // how it exits is not the tests' point
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addrs <- addr
			}
		}
	}()
	select {
	case s.url = <-addrs:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("the server exited before listening:\n%s", s.stderr.String())
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("the server did not print its listening line within 30 s:\n%s", s.stderr.String())
	}
}

// stop ends the server with SIGTERM, or kills it after 30 s.
func (s *service) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// startTestService starts a service of its own for t, on a fresh data directory, stopped at
// t's cleanup; it returns the base URL.
func startTestService(t *testing.T) string {
	t.Helper()
	s, err := startService(serviceBin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr.String())
		}
	})
	return s.url
}
