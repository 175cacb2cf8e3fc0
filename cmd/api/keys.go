package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/acme/orders/access"
	"github.com/acme/orders/api"
	"github.com/acme/orders/providers"
	"github.com/alecthomas/kong"
	"golang.org/x/term"
)

type keysCmd struct {
	Add  keysAddCmd  `cmd:"" help:"Make a new API key for a principal: print it once, append only its hash to the keys file. A running service reads the file again on SIGHUP."`
	Hash keysHashCmd `cmd:"" help:"Print the SHA-256 hex of a key read from standard input, for a keys file: 'echo -n KEY | api keys hash' or 'api keys hash < FILE'."`
}

// keysHashCmd takes the key on standard input only: an argument would show it to every user
// of the machine in the process list.
type keysHashCmd struct{}

func (c *keysHashCmd) Run(e *env) error {
	key, err := readKey(e)
	if err != nil {
		return err
	}
	sum := api.HashKey(key)
	_, err = fmt.Fprintln(e.stdout, hex.EncodeToString(sum[:]))
	return err
}

// readKey reads the key for keys hash from standard input; from a terminal, without echoing it.
func readKey(e *env) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(e.stderr, "key (not shown): ")
		line, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", err
		}
		if len(line) == 0 {
			return "", errors.New("no key given")
		}
		return string(line), nil
	}
	key, err := readSecret(e.stdin)
	if err != nil {
		return "", fmt.Errorf("the key on standard input is %w: give it as 'echo -n KEY | api keys hash' or 'api keys hash < FILE'", err)
	}
	return key, nil
}

// maxSecret bounds a key read from standard input or a file: a key is a line, not a document.
const maxSecret = 4096

// readSecret reads a secret given as one line; a trailing newline is not part of it, so that
// 'echo KEY' and a file saved by an editor give the key. Its errors complete "the key is …".
func readSecret(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSecret+1))
	if err != nil {
		return "", fmt.Errorf("unreadable (%w)", err)
	}
	if len(data) > maxSecret {
		return "", fmt.Errorf("longer than %d bytes", maxSecret)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case s == "":
		return "", errors.New("empty")
	case strings.ContainsAny(s, "\r\n"):
		return "", errors.New("more than one line")
	}
	return s, nil
}

// keyInArguments turns kong's refusal of 'api keys hash KEY', as earlier versions took it,
// into directions, without repeating the key into the terminal or a log.
func keyInArguments(err error) error {
	var perr *kong.ParseError
	if errors.As(err, &perr) && perr.Context != nil && perr.Context.Command() == "keys hash" &&
		strings.HasPrefix(err.Error(), "unexpected argument") {
		return errors.New("keys hash takes no arguments: it reads the key from standard input, so that the key stays out of the process list ('echo -n KEY | api keys hash' or 'api keys hash < FILE')")
	}
	return err
}

type keysAddCmd struct {
	Name     string   `arg:"" help:"The principal: who the key speaks for (recorded in every event it causes)."`
	Roles    []string `name:"role" default:"client" help:"Role the key grants: client, auditor or admin. Repeat the flag or separate with commas for several."`
	KeysFile string   `required:"" env:"API_KEYS_FILE" placeholder:"FILE" help:"The keys file to append to; created (mode 0600) if missing."`
}

// keyPrefix starts every generated key, so that a key pasted where it does not belong is easy
// to find and to tell from other secrets.
const keyPrefix = "ord_"

func (c *keysAddCmd) Run(e *env) error {
	if err := access.ValidatePrincipal(c.Name); err != nil {
		return err
	}
	roles, err := access.ParseRoles(strings.Join(c.Roles, ","))
	if err != nil {
		return err
	}
	// Refuse to append to a file the server could not read.
	if _, err := os.Stat(c.KeysFile); err == nil {
		if _, err := readKeys(c.KeysFile); err != nil {
			return err
		}
	}
	key := keyPrefix + rand.Text() // 128 random bits
	line := api.APIKey{Principal: c.Name, Hash: api.HashKey(key), Roles: roles}.Line()
	if err := appendLine(c.KeysFile, line); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "added a key for %s (%s) to %s; it is shown only this once, and the file keeps only its hash.\n"+
		"A running service accepts it once it reads the file again: send it SIGHUP (kill -HUP <pid>); no restart is needed.\n", c.Name, roles, c.KeysFile)
	_, err = fmt.Fprintln(e.stdout, key)
	return err
}

// appendLine appends line to the file at path, on a line of its own, and syncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	// Start on a new line if the file does not end with one.
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if last[0] != '\n' {
			line = "\n" + line
		}
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// readKeys reads the keys file (see api.ParseAPIKeys). No file, no keys: development mode.
func readKeys(path string) (api.APIKeys, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys, err := api.ParseAPIKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, errors.New(path + ": no keys")
	}
	return keys, nil
}

// reloadOnHangup calls each reload on every SIGHUP, until stop: the files a running service
// reads again without a restart.
func reloadOnHangup(ctx context.Context, reloads ...func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				for _, reload := range reloads {
					reload()
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// reloadKeys reads the keys file again and makes its keys the ones the server accepts: keys
// are rotated without a restart. A file that cannot be read or holds no key leaves the keys
// in use, with an error in the log.
func reloadKeys(path string, srv *api.Server, log *slog.Logger) func() {
	return func() {
		keys, err := readKeys(path)
		if err == nil {
			err = srv.ReplaceAPIKeys(keys)
		}
		if err != nil {
			log.Error("keys file not reloaded; the keys in use stay", "file", path, "error", err)
			return
		}
		log.Info("keys file reloaded", "file", path, "keys", len(keys))
	}
}

// reloadProviders reads the payment providers file again and makes its providers the ones the
// server takes events from: secrets are rotated without a restart. A file that cannot be read
// or is malformed leaves the providers in use, with an error in the log.
func reloadProviders(path string, srv *api.Server, log *slog.Logger) func() {
	return func() {
		ps, err := providers.ReadFile(path)
		if err != nil {
			log.Error("payment providers file not reloaded; the providers in use stay", "file", path, "error", err)
			return
		}
		srv.SetProviders(ps)
		log.Info("payment providers file reloaded", "file", path, "providers", ps.Names())
	}
}
