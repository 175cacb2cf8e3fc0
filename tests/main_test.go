package tests

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/acme/orders/eventstore/postgres/pgtest"
)

var (
	// binary is the server built from ./cmd/api by TestMain.
	binary string
	// openAPIDoc is api/openapi.yaml as it was when the binary that embeds it was built.
	openAPIDoc []byte
)

// TestMain builds the real binary once for every test in the package: the tests talk to the
// process over HTTP and signals, never to its packages.
func TestMain(m *testing.M) {
	flag.Parse()
	if !flagSet("test.parallel") {
		// The tests spend most of their time waiting for the processes they start (a server's
		// start, a lease, a delivery), not computing: more of them than the machine has cores
		// run at once unless -parallel says otherwise.
		flag.Set("test.parallel", fmt.Sprint(max(4, 2*runtime.GOMAXPROCS(0))))
	}
	os.Exit(buildAndRun(m))
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func buildAndRun(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "orders-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	binary = filepath.Join(dir, "api")
	// The crash tests need the hooks that kill the server at chosen points (cmd/api/hooks_crash.go).
	args := []string{"build", "-tags", "crashhooks", "-o", binary}
	if raceEnabled {
		// A race inside the server must fail the suite just like one inside a test.
		args = append(args, "-race")
	}
	args = append(args, "./cmd/api")
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	// Read after the build, which embedded it: the closest the test can get to the same bytes.
	if openAPIDoc, err = os.ReadFile(filepath.Join(root, "api", "openapi.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	return pgtest.Main(m) // stops the PostgreSQL server of the shared-store tests, if one started
}

// soakEnv, set by .ci/run for its soak after the test command, makes the storms, crash loops
// and fuzzing runs of the package as long as soakSize says.
const soakEnv = "ORDERS_SOAK"

// soakSize is the size of a storm, crash loop or fuzzing run: normal in the test command, enough
// to show its property (a storm enough concurrency to collide, a crash loop a few kills), or
// long under ORDERS_SOAK=1.
func soakSize(normal, long int) int {
	if os.Getenv(soakEnv) != "" {
		return long
	}
	return normal
}

// moduleRoot is the directory of the go.mod this package belongs to.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := string(bytes.TrimSpace(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}
