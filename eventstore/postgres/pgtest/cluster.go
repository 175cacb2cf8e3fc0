package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// errNoBinaries reports that initdb and pg_ctl were not found.
var errNoBinaries = errors.New("initdb and pg_ctl not found on PATH nor in /usr/lib/postgresql/*/bin: install PostgreSQL (Debian: apt-get install postgresql)")

// serverOptions are the server's settings beyond its port and sockets: no fsync (its data is
// thrown away), and connections enough for many tests in parallel, each store with a pool.
const serverOptions = "-c fsync=off -c max_connections=1000"

// cluster is a PostgreSQL data directory and the server running on it.
type cluster struct {
	bin  string // the directory of initdb and pg_ctl
	dir  string // temporary: data/, the log and the Unix socket
	port int
	// runAs, if set, is the user to run the binaries as: PostgreSQL refuses to run as root.
	runAs *user.User
	// settings are the server's settings beyond serverOptions, as name=value.
	settings []string
}

func (c *cluster) data() string    { return filepath.Join(c.dir, "data") }
func (c *cluster) logFile() string { return filepath.Join(c.dir, "server.log") }

// url is the URL of database name, as the postgres superuser.
func (c *cluster) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// startCluster creates a data directory in a new temporary directory and starts a server on
// it. If it fails, it removes the directory.
func startCluster(ctx context.Context, settings []string) (*cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, settings: settings}
	if os.Geteuid() == 0 {
		if c.runAs, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("running as root, the binaries run as the postgres user: %w", err)
		}
	}
	if c.dir, err = os.MkdirTemp("", "orders-pgtest-"); err != nil {
		return nil, err
	}
	if err := c.own(); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	if err := c.run(ctx, "initdb", "-D", c.data(), "--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	// Another process may take the free port before the server does: try a few.
	for range 3 {
		if err = c.startServer(ctx); err == nil {
			return c, nil
		}
	}
	os.RemoveAll(c.dir)
	return nil, err
}

// own gives the temporary directory to the user the binaries run as.
func (c *cluster) own() error {
	if c.runAs == nil {
		return nil
	}
	uid, err := strconv.Atoi(c.runAs.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(c.runAs.Gid)
	if err != nil {
		return err
	}
	return os.Chown(c.dir, uid, gid)
}

// startServer starts the server on a free port and waits until it accepts connections.
func (c *cluster) startServer(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.port = port
	return c.startOnPort(ctx)
}

// startOnPort starts the server on c.port and waits until it accepts connections.
func (c *cluster) startOnPort(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s %s", c.port, c.dir, serverOptions)
	for _, s := range c.settings {
		opts += " -c " + s // the last of a setting given twice stands
	}
	err := c.run(ctx, "pg_ctl", "-w", "-t", "60", "-D", c.data(), "-l", c.logFile(), "-o", opts, "start")
	if err != nil {
		log, _ := os.ReadFile(c.logFile())
		return fmt.Errorf("%w; server log:\n%s", err, lastLines(log, 20))
	}
	return nil
}

// stop stops the server at once (its data is thrown away) and removes the directory.
func (c *cluster) stop() error {
	return errors.Join(c.kill(), os.RemoveAll(c.dir))
}

// kill stops the server at once, as a crash would: the next start recovers from its log.
func (c *cluster) kill() error {
	return c.run(context.Background(), "pg_ctl", "-w", "-D", c.data(), "-m", "immediate", "stop")
}

// run runs one of the binaries, as c.runAs if set.
func (c *cluster) run(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	cmd := exec.CommandContext(ctx, path, args...)
	if c.runAs != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs.Username, "--", path}, args...)...)
	}
	// Not the test's working directory, which the postgres user may not be allowed to enter.
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// findBinaries returns the directory that holds both initdb and pg_ctl: pg_ctl's on PATH, else
// the newest version's under /usr/lib/postgresql, where Debian keeps them off PATH.
func findBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	for _, dir := range append(dirs, found...) {
		if executable(filepath.Join(dir, "initdb")) && executable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", errNoBinaries
}

// version is the major version in a path /usr/lib/postgresql/<version>/bin, or 0.
func version(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}
