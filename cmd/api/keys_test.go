package main

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeysHashReadsStandardInput(t *testing.T) {
	sum := sha256.Sum256([]byte("alice-secret"))
	want := hex.EncodeToString(sum[:]) + "\n"
	for _, stdin := range []string{"alice-secret", "alice-secret\n", "alice-secret\r\n"} {
		r := runCLIWith(t, cliInput{stdin: stdin}, "keys", "hash")
		if r.err != nil || r.stdout != want {
			t.Errorf("keys hash < %q: %v, printed %q; want %q", stdin, r.err, r.stdout, want)
		}
	}
	for _, tc := range []struct{ stdin, want string }{
		{"", "the key on standard input is empty"},
		{"\n", "the key on standard input is empty"},
		{"alice\nbob\n", "the key on standard input is more than one line"},
		{strings.Repeat("k", maxSecret+1), "the key on standard input is longer than 4096 bytes"},
	} {
		r := runCLIWith(t, cliInput{stdin: tc.stdin}, "keys", "hash")
		if r.err == nil || !strings.HasPrefix(r.err.Error(), tc.want) || r.stdout != "" {
			t.Errorf("keys hash < %.20q: %v, printed %q; want the error %q", tc.stdin, r.err, r.stdout, tc.want)
		}
	}
}

// A key given as an argument is refused, and the error points to standard input without
// repeating the key.
func TestKeysHashRefusesAnArgument(t *testing.T) {
	r := runCLIWith(t, cliInput{stdin: "other"}, "keys", "hash", "alice-secret")
	if r.err == nil || r.stdout != "" {
		t.Fatalf("keys hash alice-secret: %v, printed %q; want it refused", r.err, r.stdout)
	}
	if msg := r.err.Error(); strings.Contains(msg, "alice-secret") || !strings.Contains(msg, "echo -n KEY | api keys hash") {
		t.Errorf("error %q; want directions to standard input, without the key", msg)
	}
	help := runCLI(t, "keys", "hash", "--help")
	if !strings.Contains(help.stdout, "echo -n KEY | api keys hash") || !strings.Contains(help.stdout, "api keys hash < FILE") {
		t.Errorf("keys hash --help:\n%s\nwant both ways to give the key", help.stdout)
	}
}

// The service reads the keys file again on SIGHUP (reloadKeysOnHangup): keys add says so,
// and does not send anyone to restart it.
func TestKeysAddPointsToSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	r := runCLI(t, "keys", "add", "shop-1", "--keys-file", file)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.HasPrefix(r.stdout, keyPrefix) {
		t.Errorf("printed %q; want a new key", r.stdout)
	}
	if !strings.Contains(r.stderr, "SIGHUP") || strings.Contains(strings.ToLower(r.stderr), "restart the service") {
		t.Errorf("keys add said:\n%s\nwant it to point to SIGHUP, not to a restart", r.stderr)
	}
	if help := runCLI(t, "keys", "add", "--help"); !strings.Contains(help.stdout, "SIGHUP") {
		t.Errorf("keys add --help:\n%s\nwant it to mention SIGHUP", help.stdout)
	}
}
