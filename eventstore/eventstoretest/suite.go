// Package eventstoretest is the conformance suite that every eventstore backend runs, in the
// manner of testing/fstest.TestFS.
package eventstoretest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// Backend is what the suite tests: a store, its feed, and Close.
type Backend interface {
	eventstore.Store
	eventstore.Feed
	Close() error
}

// Opener opens a backend on one data location. Once the Backend it returned is closed, calling
// it again must reopen the same data: that is how the suite checks that closing and reopening
// keeps everything. The suite closes every Backend it opens, exactly once.
type Opener func(t *testing.T) Backend

// NewBackend prepares a data location for one subtest (a temporary directory, say) and returns
// the Opener for it. Subtests call it in parallel.
type NewBackend func(t *testing.T) Opener

// Options tells the suite what a backend cannot do. The zero Options runs every check.
type Options struct {
	// SkipGlobalEventIDUniqueness skips the checks that an event id already stored is refused
	// with ErrDuplicateEventID outside an idempotent repeat, for a backend that cannot enforce
	// it (KurrentDB only recognises repeated ids within its idempotency window).
	SkipGlobalEventIDUniqueness bool

	// ExpiredForgottenPerWrite is how many expired streams (see eventstore.StreamAppend.MaxAge)
	// a write of the backend forgets at most, their events leaving the log: the embedded
	// store's and PostgreSQL's 64. 0 is a backend whose log keeps them (KurrentDB, until a
	// scavenge), which the suite then checks.
	ExpiredForgottenPerWrite int

	// NotRun names the suite's tests that do not hold for the backend, by their names under
	// the suite's ("Append/EventIDsUniqueInStore", a group such as "MultiStreamAppend", or a
	// row such as "Append/ExpectedRevision/Deleted/Exact(2)"), each with why. They are not run
	// and the reason is logged: a skip would make CI, which allows none, fail.
	NotRun map[string]string
}

// Run runs the conformance suite against the backend that newBackend prepares.
//
// Each test (or each row of a table test) calls newBackend for a data location of its own and
// runs in parallel with the others. Tests also name their streams with a prefix of their own
// and never assume the global log holds only their events, so a backend whose data locations
// all share one server passes too.
func Run(t *testing.T, newBackend NewBackend, opts Options) {
	s := &suite{newBackend: newBackend, opts: opts}
	for _, g := range groups {
		if s.notRun(t, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				if s.notRun(t, g.name+"/"+c.name) {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, s)
				})
			}
		})
	}
}

// groups are the suite's tests, by group, in the order they start.
var groups = []struct {
	name  string
	cases []testCase
}{
	{"Append", []testCase{
		{"ExpectedRevision", testAppendExpectedRevision},
		{"RevisionsAndPositions", testRevisionsAndPositions},
		{"OneWinnerAtOneRevision", testOneWinnerAtOneRevision},
		{"RefusalsNameRevisionsAReadFinds", testRefusalsNameRevisionsAReadFinds},
		{"FailuresDoNotAffectConcurrentAppends", testFailuresDoNotAffectConcurrentAppends},
		{"IdempotentRepeat", testIdempotentRepeat},
		{"PartialRepeat", testPartialRepeat},
		{"EventIDsUniqueInStore", testEventIDsUniqueInStore},
		{"InvalidArguments", testInvalidArguments},
		{"LargeEvent", testLargeEvent},
	}},
	{"MultiStreamAppend", []testCase{
		{"WritesAll", testMultiStreamAppendWritesAll},
		{"AllOrNothing", testMultiStreamAppendAllOrNothing},
		{"PartialRepeat", testMultiStreamAppendPartialRepeat},
		{"OneWinner", testMultiStreamAppendOneWinner},
		{"InvalidArguments", testMultiStreamAppendInvalidArguments},
		{"MaxAge", testMultiStreamAppendMaxAge},
	}},
	{"DeleteStream", []testCase{
		{"ExpectedRevision", testDeleteExpectedRevision},
		{"Truncate", testTruncate},
	}},
	{"ReadStream", []testCase{
		{"Ranges", testReadStreamRanges},
		{"MissingOrDeleted", testReadStreamMissingOrDeleted},
		{"Recreated", testReadStreamRecreated},
		{"RecordedFields", testRecordedFields},
		{"BreakEarly", testBreakEarly},
		{"Expired", testReadStreamExpired},
	}},
	{"MaxAge", []testCase{
		{"HidesOldEvents", testMaxAgeHidesOldEvents},
		{"ExpiredStreamGoesOn", testMaxAgeExpiredStreamGoesOn},
		{"SetByWrite", testMaxAgeSetByWrite},
		{"Forgotten", testMaxAgeForgotten},
	}},
	{"Feed", []testCase{
		{"ReadAllInCommitOrder", testReadAllInCommitOrder},
		{"ReadAllFromAndLimit", testReadAllFromAndLimit},
		{"Head", testHead},
		{"Filter", testFilter},
		{"SubscribeCatchUpThenLive", testSubscribeCatchUpThenLive},
		{"SubscribeAfterIsExclusive", testSubscribeAfterIsExclusive},
		{"SubscribeWhileWritersAppend", testSubscribeWhileWritersAppend},
		{"SubscriptionEndsWithContext", testSubscriptionEndsWithContext},
	}},
	{"Lifecycle", []testCase{
		{"CancelledContext", testCancelledContext},
		{"CloseAndReopen", testCloseAndReopen},
		{"CallsAfterClose", testCallsAfterClose},
		{"SubscriptionEndsOnClose", testSubscriptionEndsOnClose},
	}},
}

// notRun reports whether the test of the suite named name is in Options.NotRun, and logs why.
func (s *suite) notRun(t *testing.T, name string) bool {
	why, ok := s.opts.NotRun[name]
	if ok {
		t.Logf("not run for this backend: %s: %s", name, why)
	}
	return ok
}

type suite struct {
	newBackend NewBackend
	opts       Options
}

// A testCase opens its own backend (or one per row) with s.setup.
type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// patience bounds every wait for something that must happen: a subscription's next event or
// its end, Close returning, a loop that breaks early. It guards against hangs; it is not a
// performance expectation.
const patience = 30 * time.Second

// fixture is one subtest's backend and a stream prefix that no other subtest uses.
type fixture struct {
	open   Opener
	b      Backend
	closed bool
	prefix string
	start  time.Time // before anything was appended
}

// setup opens a backend on a new data location and closes it when the test ends.
func (s *suite) setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		open:   s.newBackend(t),
		prefix: uniquePrefix(t),
		start:  time.Now(),
	}
	f.b = f.open(t)
	t.Cleanup(func() {
		if f.closed {
			return
		}
		if err := closeWithin(f.b); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// close closes the backend and fails the test if that fails or hangs.
func (f *fixture) close(t *testing.T) {
	t.Helper()
	f.closed = true
	if err := closeWithin(f.b); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// reopen opens the closed backend's data location again.
func (f *fixture) reopen(t *testing.T) {
	t.Helper()
	if !f.closed {
		t.Fatal("suite bug: reopen before close")
	}
	f.b = f.open(t)
	f.closed = false
}

func closeWithin(b Backend) error {
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(patience):
		return errHung
	}
}

var errHung = fmt.Errorf("did not return within %v", patience)

// uniquePrefix names streams after the test, plus a random part so that repeated runs against
// one server do not meet each other's streams.
func uniquePrefix(t *testing.T) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return name + "-" + uuid.NewString()[:8] + "/"
}

// stream returns the test's stream called name.
func (f *fixture) stream(name string) string { return f.prefix + name }

// own is the filter that keeps the test's own streams.
func (f *fixture) own() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{f.prefix}}
}

// within runs fn and fails the test if it does not return in time. fn must report with
// t.Errorf, not t.Fatal, as it runs on another goroutine.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatalf("%s did not return within %v", what, patience)
	}
}
