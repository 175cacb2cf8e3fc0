package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// parseCLI parses args as the command line does, without running anything.
func parseCLI(t *testing.T, env map[string]string, args ...string) (*cli, error) {
	t.Helper()
	var c cli
	p, err := newParser(&c, func(k string) string { return env[k] }, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Parse(args)
	return &c, err
}

// --shutdown-timeout is named like the other durations; API_SHUTDOWN_TIMEOUT still sets it.
func TestShutdownTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want time.Duration
	}{
		{"default", nil, nil, 15 * time.Second},
		{"flag", nil, []string{"--shutdown-timeout", "3s"}, 3 * time.Second},
		{"environment", map[string]string{"API_SHUTDOWN_TIMEOUT": "4s"}, nil, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCLI(t, tc.env, append([]string{"serve"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Serve.Shutdown != tc.want {
				t.Errorf("shutdown timeout %v; want %v", c.Serve.Shutdown, tc.want)
			}
		})
	}
	if _, err := parseCLI(t, nil, "serve", "--shutdown", "3s"); err == nil {
		t.Error("serve --shutdown 3s was accepted; want the flag renamed")
	}
	help := runCLI(t, "serve", "--help")
	if !strings.Contains(help.stdout, "--shutdown-timeout=15s") || !strings.Contains(help.stdout, "$API_SHUTDOWN_TIMEOUT") {
		t.Errorf("serve --help:\n%s\nwant --shutdown-timeout and $API_SHUTDOWN_TIMEOUT", help.stdout)
	}
}
