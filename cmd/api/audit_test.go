package main

import (
	"strings"
	"testing"
)

func TestAuditStatePoint(t *testing.T) {
	help := runCLI(t, "audit", "state", "--help")
	if !strings.Contains(help.stdout, "give exactly one") || !strings.Contains(help.stdout, "--revision=N") || !strings.Contains(help.stdout, "--at=TIME") {
		t.Errorf("help does not show --revision and --at as alternatives:\n%s", help.stdout)
	}
	if strings.Contains(help.stdout, "--revision=N --at=TIME") {
		t.Errorf("the usage line asks for both --revision and --at:\n%s", help.stdout)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"--revision", "1", "--at", "2026-11-29T12:00:00Z"}, "--revision and --at can't be used together"},
		{"neither", nil, "--revision N or --at TIME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"audit", "state", "ORDER", "--data", t.TempDir()}, tc.args...)...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %v; want one saying %q", r.err, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("printed %q on an error", r.stdout)
			}
		})
	}
}
