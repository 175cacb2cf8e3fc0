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

	"github.com/acme/orders/api"
)

type keysCmd struct {
	Add  keysAddCmd  `cmd:"" help:"Make a new API key for a principal: print it once, append only its hash to the keys file."`
	Hash keysHashCmd `cmd:"" help:"Print the SHA-256 hex of a key, for a keys file."`
}

type keysHashCmd struct {
	Key string `arg:"" help:"The API key."`
}

func (c *keysHashCmd) Run(e *env) error {
	sum := api.HashKey(c.Key)
	_, err := fmt.Fprintln(e.stdout, hex.EncodeToString(sum[:]))
	return err
}

type keysAddCmd struct {
	Name     string   `arg:"" help:"The principal: who the key speaks for (recorded in every event it causes)."`
	Roles    []string `name:"role" default:"client" help:"Role the key grants: client, auditor or admin. Repeat the flag or separate with commas for several."`
	KeysFile string   `required:"" env:"API_KEYS_FILE" help:"The keys file to append to; created (mode 0600) if missing."`
}

// keyPrefix starts every generated key, so that a key pasted where it does not belong is easy
// to find and to tell from other secrets.
const keyPrefix = "ord_"

func (c *keysAddCmd) Run(e *env) error {
	if err := api.ValidatePrincipal(c.Name); err != nil {
		return err
	}
	roles, err := api.ParseRoles(strings.Join(c.Roles, ","))
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
	fmt.Fprintf(e.stderr, "added a key for %s (%s) to %s; it is shown only this once, and the file keeps only its hash.\nRestart the service to accept it.\n", c.Name, roles, c.KeysFile)
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

// reloadKeysOnHangup reads the keys file again on every SIGHUP and makes its keys the ones the
// server accepts, until stop: keys are rotated without a restart. A file that cannot be read
// or holds no key leaves the keys in use, with an error in the log.
func reloadKeysOnHangup(ctx context.Context, path string, srv *api.Server, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				keys, err := readKeys(path)
				if err == nil {
					err = srv.ReplaceAPIKeys(keys)
				}
				if err != nil {
					log.Error("keys file not reloaded; the keys in use stay", "file", path, "error", err)
					continue
				}
				log.Info("keys file reloaded", "file", path, "keys", len(keys))
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
