package kurrent_test

import (
	"os"
	"testing"

	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
)

// options are where KurrentDB and the contract differ (see the package doc): what the suite
// does not run against it, and why.
var options = eventstoretest.Options{
	SkipGlobalEventIDUniqueness: true,
	// ExpiredForgottenPerWrite 0: $all keeps the events of expired streams until a scavenge.
	NotRun: map[string]string{
		"Append/EventIDsUniqueInStore": "KurrentDB does not refuse an event id stored in another stream",
		"Append/ExpectedRevision/Deleted/Exact(2)": "KurrentDB accepts the last revision of a soft-deleted stream " +
			"as the expected revision and recreates the stream; the contract refuses it",
		"Append/ExpectedRevision/Expired/Exact(2)": "KurrentDB accepts the last revision of a stream whose events " +
			"are all past its $maxAge as the expected revision; the contract refuses it",
		"Append/ExpectedRevision/Expired/StreamExists": "KurrentDB takes a stream whose events are all past its " +
			"$maxAge for one that exists; the contract refuses StreamExists",
		"ReadStream/Expired": "KurrentDB answers a forward read from past the first revision of a stream whose " +
			"events are all past its $maxAge with no event, not StreamNotFound; telling would take a second read",
		"MultiStreamAppend": "EventStore-Client-Go/v4 has no append to several streams at once",
	},
}

// TestConformance runs the suite through the client against the KurrentDB server at
// KURRENTDB_URL, every data location on that one server; without it, against the test server,
// one server (and data directory) per data location.
func TestConformance(t *testing.T) {
	if url := kurrentdbURL(); url != "" {
		t.Logf("against the KurrentDB at KURRENTDB_URL")
		eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
			return func(t *testing.T) eventstoretest.Backend { return MustOpen(t, url) }
		}, options)
		return
	}
	t.Logf("against the test server (kurrenttest); set KURRENTDB_URL to run against a KurrentDB")
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		srv := StartServer(t)
		return func(t *testing.T) eventstoretest.Backend { return MustOpen(t, srv.URL()) }
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
