package main

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

// cliRun is one run of the command line: what it printed and the error it returned.
type cliRun struct {
	stdout, stderr string
	err            error
}

// cliInput is what a run of the command line reads besides its arguments.
type cliInput struct {
	stdin string
	env   map[string]string
}

// runCLI runs the command line as main does, with nothing on standard input and no
// environment variables.
func runCLI(t *testing.T, args ...string) cliRun {
	t.Helper()
	return runCLIWith(t, cliInput{}, args...)
}

func runCLIWith(t *testing.T, in cliInput, args ...string) cliRun {
	t.Helper()
	var stdout, stderr strings.Builder
	err := run(context.Background(), args, func(k string) string { return in.env[k] }, strings.NewReader(in.stdin), &stdout, &stderr)
	return cliRun{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func TestVersionFlag(t *testing.T) {
	r := runCLI(t, "--version")
	if r.err != nil {
		t.Fatalf("api --version: %v", r.err)
	}
	// A test binary carries no revision; the lines are there all the same.
	for _, want := range []string{"api ", "revision: ", "go: go1."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("api --version printed:\n%s\nwant a line with %q", r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "listening") {
		t.Errorf("api --version started the service:\n%s", r.stdout)
	}
}

func TestDescribeBuild(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/acme/orders", Version: "v1.2.3"}}
	set := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"clean tree", set("vcs.revision", "abc123", "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "false"),
			"api v1.2.3 (module github.com/acme/orders)\nrevision: abc123\ncommit time: 2026-01-02T03:04:05Z\ngo: go1.99.1"},
		{"modified tree", set("vcs.revision", "abc123", "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "true"),
			"api v1.2.3 (module github.com/acme/orders)\nrevision: abc123, with uncommitted changes\ncommit time: 2026-01-02T03:04:05Z\ngo: go1.99.1"},
		{"no version control", nil,
			"api v1.2.3 (module github.com/acme/orders)\nrevision: unknown (built without version control information)\ngo: go1.99.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := *bi
			b.Settings = tc.settings
			if got := describeBuild(&b); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
