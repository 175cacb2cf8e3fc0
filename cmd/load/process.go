package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acme/orders/tests/load"
)

// child is a server process started by the tool: the service or the baseline.
type child struct {
	name   string
	cmd    *exec.Cmd
	url    string
	stderr *os.File
	exited chan struct{}
	err    error
}

// startChild runs name args, with stderr to a file in dir, and waits for its listening line.
func startChild(ctx context.Context, dir, label, name string, args ...string) (*child, error) {
	cmd := exec.Command(name, args...)
	stderr, err := os.Create(filepath.Join(dir, label+".stderr"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	c := &child{name: label, cmd: cmd, stderr: stderr, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				found <- u
				break
			}
		}
		io.Copy(io.Discard, out)
		c.err = cmd.Wait()
		close(c.exited)
	}()
	select {
	case c.url = <-found:
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before listening: %v\n%s", label, c.err, c.tail())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not listen within 30s", label)
	case <-ctx.Done():
		cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

// stop ends the child with SIGTERM and reports whether it exited cleanly and without a panic.
func (c *child) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s did not exit within 30s of SIGTERM", c.name)
	}
	c.stderr.Close()
	if c.err != nil {
		return fmt.Errorf("%s: %v\n%s", c.name, c.err, c.tail())
	}
	if log, _ := os.ReadFile(c.stderr.Name()); load.Panicked(log) {
		return fmt.Errorf("%s logged a panic (see %s)", c.name, c.stderr.Name())
	}
	return nil
}

func (c *child) tail() string {
	b, _ := os.ReadFile(c.stderr.Name())
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}

// buildServer builds ./cmd/api of the module in the working directory into dir.
func buildServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "api")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/acme/orders/cmd/api")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/api: %v\n%s", err, out)
	}
	return bin, nil
}

// serve serves h on a loopback port until ctx ends. The tool runs the baseline and the
// yardstick as its own children, each in a process of its own as the service is, so that all
// compete with the clients alike.
func serve(ctx context.Context, stdout io.Writer, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// profile takes a CPU profile of the server at pprofAddr over the measured window of the
// lifecycles and writes it to --cpu-profile.
func (cmd *runCmd) profile(ctx context.Context, pprofAddr string) error {
	seconds := max(1, int(cmd.Duration.Seconds()))
	sleepCtx(ctx, cmd.Warmup)
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s", res.Status)
	}
	f, err := os.Create(cmd.CPUProfile)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	return f.Close()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
