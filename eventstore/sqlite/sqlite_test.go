package sqlite_test

import (
	"testing"

	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/sqlite"
)

func TestConformance(t *testing.T) {
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) eventstoretest.Backend {
			return MustOpen(t, dir)
		}
	}, eventstoretest.Options{})
}

// MustOpen opens a store in dir; the caller closes it.
func MustOpen(tb testing.TB, dir string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
