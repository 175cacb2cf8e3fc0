// Command testreport reads the output of go test -json on stdin and prints what CI needs of
// it: each package's result and time, the whole output of every test that failed, and every
// test that skipped. It ends with the first line of each message the failed tests logged, so
// that the tail of a long run says what failed even when a server's log fills the output. It
// exits 1 if a test failed, a package did not build, or a test skipped: CI runs every test
// (internal/testenv).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is a line of go test -json (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	failed, skipped, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if failed || len(skipped) > 0 {
		os.Exit(1)
	}
}

// report prints the run's summary to out and returns whether anything failed and the tests
// that skipped, with why.
func report(in *os.File, out *os.File) (failed bool, skipped []string, err error) {
	output := map[string]*strings.Builder{} // by package and test
	var slow, messages []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(out, sc.Text()) // go test's own lines, such as build errors
			continue
		}
		id := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if output[id] == nil {
				output[id] = &strings.Builder{}
			}
			output[id].WriteString(e.Output)
		case "fail":
			failed = true
			if e.Test == "" {
				fmt.Fprintf(out, "FAIL %s (%s)\n", e.Package, time.Duration(e.Elapsed*float64(time.Second)).Round(time.Second))
			}
			if o := output[id]; o != nil {
				fmt.Fprint(out, o.String())
				messages = append(messages, logged(e.Test, o.String())...)
			}
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(output[id])))
			}
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(out, "ok   %s (%s)\n", e.Package, time.Duration(e.Elapsed*float64(time.Second)).Round(time.Second))
			} else if e.Elapsed >= 20 && !strings.Contains(e.Test, "/") {
				slow = append(slow, fmt.Sprintf("%6.1fs %s %s", e.Elapsed, e.Package, e.Test))
			}
		}
		if e.Action != "output" && e.Action != "run" && e.Action != "pause" && e.Action != "cont" {
			delete(output, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(slow)))
	fmt.Fprintf(out, "\ntests over 20 s: %d\n%s\n", len(slow), strings.Join(slow, "\n"))
	fmt.Fprintf(out, "\ntests skipped: %d\n", len(skipped))
	for _, s := range skipped {
		fmt.Fprintln(out, "  "+s)
	}
	if len(messages) > 0 {
		fmt.Fprintf(out, "\nwhat the failed tests logged (first lines):\n%s\n", strings.Join(messages, "\n"))
	}
	return failed, skipped, sc.Err()
}

// logLine is the first line of a message a test logged: "    file_test.go:123: text".
var logLine = regexp.MustCompile(`^\s+\w+\.go:\d+: `)

// logged is the first line of each message test logged, each clipped to 300 bytes, at most
// 40 of them.
func logged(test, output string) []string {
	var lines []string
	for l := range strings.SplitSeq(output, "\n") {
		if !logLine.MatchString(l) {
			continue
		}
		if len(lines) == 40 {
			return append(lines, "  "+test+": …")
		}
		if l = strings.TrimSpace(l); len(l) > 300 {
			l = l[:300] + "…"
		}
		lines = append(lines, "  "+test+": "+l)
	}
	return lines
}

// skipReason is the last line a skipped test logged: the message of its Skip.
func skipReason(o *strings.Builder) string {
	if o == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(o.String()), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return ""
}
