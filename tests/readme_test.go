package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/acme/orders/internal/testenv"
)

// walkthroughInfo marks a fenced block of README.md as a script that TestReadmeWalkthroughs
// runs: "```sh walkthrough NAME".
const walkthroughInfo = "sh walkthrough "

// TestReadmeWalkthroughs runs the README's walk-throughs as written, each in a directory of its
// own with the built binary as both `api` and `go run ./cmd/api`, and checks what each
// `# →` line says of the command above it, so that the README cannot drift from the binary.
// The README's ports (8080, the default, and 8081) become free ones, so that the walk-throughs
// run beside each other and beside anything else listening on this machine.
func TestReadmeWalkthroughs(t *testing.T) {
	t.Parallel()
	// The walk-throughs are shell scripts that talk to the service with curl, as a reader does.
	testenv.LookPath(t, "bash", "apt-get install bash")
	testenv.LookPath(t, "curl", "apt-get install curl")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := walkthroughs(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no walkthrough blocks")
	}
	for _, b := range blocks {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			b.run(t)
		})
	}
}

// walkthrough is one marked block: its name and its commands in order.
type walkthrough struct {
	name  string
	steps []step
}

// step is one command of a walk-through (continuation lines joined as the shell joins them)
// with what the README says it prints.
type step struct {
	command string
	status  string   // the HTTP status of every answer it prints, or "" for no check
	quoted  []string // fragments its output holds
}

// walkthroughs finds the marked blocks of a README.
func walkthroughs(readme string) []walkthrough {
	var (
		out []walkthrough
		cur *walkthrough
		cmd strings.Builder
		q   quoting
	)
	for line := range strings.Lines(readme) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case cur == nil && strings.HasPrefix(line, "```"+walkthroughInfo):
			cur = &walkthrough{name: strings.TrimPrefix(line, "```"+walkthroughInfo)}
		case cur == nil:
		case line == "```":
			out, cur = append(out, *cur), nil
		case cmd.Len() == 0 && strings.HasPrefix(strings.TrimSpace(line), "#"):
			if n := len(cur.steps); n > 0 {
				cur.steps[n-1].expect(strings.TrimSpace(line))
			}
		case cmd.Len() == 0 && strings.TrimSpace(line) == "":
		default:
			cmd.WriteString(line + "\n")
			if q.scan(line) && !continued(line) {
				cur.steps = append(cur.steps, step{command: cmd.String()})
				cmd.Reset()
			}
		}
	}
	return out
}

// expectation is a README line "# → 201 with `Idempotent-Replayed: true`, …".
var expectation = regexp.MustCompile("^# → ([1-5][0-9][0-9])?")

var quotedFragment = regexp.MustCompile("`([^`]+)`")

// expect notes what a comment line under the step says it prints, if it says.
func (s *step) expect(comment string) {
	m := expectation.FindStringSubmatch(comment)
	if m == nil {
		return
	}
	s.status = m[1]
	for _, f := range quotedFragment.FindAllStringSubmatch(comment, -1) {
		s.quoted = append(s.quoted, f[1])
	}
}

// quoting follows the shell's quotes across the lines of one command.
type quoting struct{ single, double bool }

// scan reads a line and reports whether the command ends with it: no quote left open, no
// continuation. A # that starts a word outside quotes starts a comment.
func (q *quoting) scan(line string) bool {
	escaped := false
	for i, r := range line {
		switch {
		case escaped:
			escaped = false
		case q.single:
			q.single = r != '\''
		case r == '\\':
			escaped = true
		case r == '"':
			q.double = !q.double
		case q.double:
		case r == '\'':
			q.single = true
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return true
		}
	}
	return !escaped && !q.single && !q.double
}

// continued reports whether a line ends in a pipe or a list operator, which go on with the
// next line.
func continued(line string) bool {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	return strings.HasSuffix(line, "|") || strings.HasSuffix(line, "&&")
}

// freePort is a port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// statusLine is the status of an answer as curl -si or api provider send prints it.
var statusLine = regexp.MustCompile(`(?m)^(?:HTTP/[0-9.]+ )?([1-5][0-9][0-9])(?: |\r?$)`)

// run runs the walk-through's steps in one shell, each step's output kept apart, and checks
// each against what the README says of it.
func (w walkthrough) run(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary, filepath.Join(bin, "api")); err != nil {
		t.Fatal(err)
	}
	// The built binary is what go run ./cmd/api would build and run; it execs, so that the
	// walk-through's kill %1 reaches the service.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// go tool runs the module's tools (go.mod's tool lines) in the walk-through's directory, as
	// a reader runs them from the module's.
	shim := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = run ] && [ \"$2\" = ./cmd/api ]; then shift 2; exec api \"$@\"; fi\n"+
		"if [ \"$1\" = tool ]; then t=$2; shift 2; exec \"$(cd %q && %q tool -n \"$t\")\" \"$@\"; fi\nexec %q \"$@\"\n", root, goTool, goTool)
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	w.buildTools(t, root, goTool)
	port, port2 := freePort(t), freePort(t)
	ports := strings.NewReplacer(":8080", ":"+port, ":8081", ":"+port2)
	var script strings.Builder
	for i, s := range w.steps {
		fmt.Fprintf(&script, "{ %s} >%q 2>&1\necho $? >%q\n", ports.Replace(s.command), filepath.Join(work, fmt.Sprint(i)), filepath.Join(work, fmt.Sprint(i)+".rc"))
	}
	env := append(hermeticEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"API_ADDR=127.0.0.1:"+port, "API_URL=http://127.0.0.1:"+port)
	if w.name == "postgres" || w.name == "store-copy" {
		env = append(env, "API_POSTGRES_URL="+pgtest.Start(t).NewDatabase(t))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	// The services a walk-through starts in the background belong to the shell's process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var shell bytes.Buffer
	cmd.Stdout, cmd.Stderr = &shell, &shell
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("the walk-through's shell: %v\n%s", err, shell.String())
	}
	for i, s := range w.steps {
		s.check(t, filepath.Join(work, fmt.Sprint(i)))
	}
}

// buildTools builds the module's tools that the walk-through runs with go tool, before its
// time starts: on a fresh machine the NATS server takes a minute or more to build on two busy
// cores, which the walk-through's reader waits for once.
func (w walkthrough) buildTools(t *testing.T, root, goTool string) {
	for _, s := range w.steps {
		for _, m := range regexp.MustCompile(`\bgo tool ([\w-]+)`).FindAllStringSubmatch(s.command, -1) {
			cmd := exec.CommandContext(t.Context(), goTool, "tool", "-n", m[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go tool -n %s: %v\n%s", m[1], err, out)
			}
		}
	}
}

// check compares what a step printed, and how it exited, with what the README says.
func (s step) check(t *testing.T, out string) {
	t.Helper()
	printed, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s: %v (did an earlier step end the shell?)", s.command, err)
	}
	rc, _ := os.ReadFile(out + ".rc")
	if strings.TrimSpace(string(rc)) != "0" && !strings.HasSuffix(strings.TrimSpace(s.command), "&") {
		t.Errorf("%sexited %s:\n%s", s.command, strings.TrimSpace(string(rc)), tail(string(printed), 2000))
		return
	}
	if s.status != "" {
		statuses := statusLine.FindAllStringSubmatch(string(printed), -1)
		if len(statuses) == 0 {
			t.Errorf("%sprinted no HTTP status; the README says %s:\n%s", s.command, s.status, tail(string(printed), 2000))
		}
		for _, st := range statuses {
			if st[1] != s.status {
				t.Errorf("%sanswered %s; the README says %s:\n%s", s.command, st[1], s.status, tail(string(printed), 2000))
			}
		}
	}
	for _, f := range s.quoted {
		if !bytes.Contains(printed, []byte(f)) {
			t.Errorf("%sprinted no %q, which the README shows:\n%s", s.command, f, tail(string(printed), 2000))
		}
	}
}

// The README and the documents in docs/ name tests as the proofs of what they say: each test
// they name is a test of the module, so that a renamed or deleted test does not leave a proof
// that proves nothing.
func TestDocumentsNameTestsThatExist(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	definition := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		for _, m := range definition.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Test[A-Z]\\w*)`")
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllSubmatch(text, -1) {
			if !defined[string(m[1])] {
				t.Errorf("%s names %s, which no test file of the module defines", filepath.Base(doc), m[1])
			}
		}
	}
}
