package kurrent_test

import (
	"os"
	"testing"

	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
)

// options: KurrentDB does not refuse an event id stored in another stream.
var options = eventstoretest.Options{SkipGlobalEventIDUniqueness: true}

// knownDifferences are the suite's rows that KurrentDB answers otherwise, with why (see the
// package doc). They are skipped, with the reason in the test log.
var knownDifferences = map[string]string{
	"Append/ExpectedRevision/Deleted/Exact(2)": "KurrentDB accepts the last revision of a soft-deleted stream " +
		"as the expected revision and recreates the stream; the contract refuses it (package doc)",
}

func skipKnownDifferences(t *testing.T, test string) {
	t.Helper()
	for row, why := range knownDifferences {
		if t.Name() == test+"/"+row {
			t.Skip(why)
		}
	}
}

// TestConformance runs the suite through the client against the test server, one server (and
// data directory) per data location.
func TestConformance(t *testing.T) {
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		skipKnownDifferences(t, "TestConformance")
		srv := StartServer(t)
		return func(t *testing.T) eventstoretest.Backend { return MustOpen(t, srv.URL()) }
	}, options)
}

// TestConformanceKurrentDB runs the suite against the KurrentDB server at KURRENTDB_URL, every
// data location on that one server.
func TestConformanceKurrentDB(t *testing.T) {
	url := kurrentdbURL()
	if url == "" {
		t.Skip("KURRENTDB_URL is not set: no KurrentDB server to test against (the README shows how to start one); " +
			"TestConformance covered the backend against the test server")
	}
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		skipKnownDifferences(t, "TestConformanceKurrentDB")
		return func(t *testing.T) eventstoretest.Backend { return MustOpen(t, url) }
	}, options)
}

// kurrentdbURL is the real KurrentDB to test against, if any.
func kurrentdbURL() string { return os.Getenv("KURRENTDB_URL") }

// StartServer starts a test server on a free port with a new data directory, and stops it when
// the test ends. Its maximum append size is 4 MiB, as KurrentDB started with
// --max-append-size=4194304: the suite appends a 1 MiB event between two others, over
// KurrentDB's default of 1 MiB.
func StartServer(tb testing.TB) *kurrenttest.Server {
	tb.Helper()
	srv, err := kurrenttest.Start("127.0.0.1:0", tb.TempDir(), kurrenttest.Config{MaxAppendSize: 4 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

// MustOpen opens a store on the server at url; the caller closes it.
func MustOpen(tb testing.TB, url string) *kurrent.Store {
	tb.Helper()
	s, err := kurrent.Open(kurrent.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
