package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestOver(t *testing.T) {
	t0 := time.Now()
	terms := Terms{Length: 10 * time.Second, Node: "a"}
	var s Sighting
	steps := []struct {
		holder string
		rev    uint64
		at     time.Duration
		over   bool
	}{
		{"b", 1, 0, false},                // first seen: the lease runs from now
		{"b", 1, 9 * time.Second, false},  // not yet a lease unchanged
		{"b", 2, 10 * time.Second, false}, // the holder appended: from now again
		{"b", 2, 19 * time.Second, false}, //
		{"b", 2, 20 * time.Second, true},  // a lease unchanged
		{"a", 7, 20 * time.Second, true},  // this process's: it does not hold it, so it is over
		{"", 9, 20 * time.Second, false},  // no node named: seen anew
		{"", 9, 30 * time.Second, true},   //
		{"b", 3, 100 * time.Hour, false},  // a clock far ahead changes nothing: first seen now
		{"b", 3, 100*time.Hour + 10*time.Second, true},
	}
	for i, st := range steps {
		over, left := terms.Over(&s, st.holder, st.rev, t0.Add(st.at))
		if over != st.over || (!over && left <= 0) {
			t.Errorf("step %d (%s at %d, %v): over %v, left %v; want over %v", i, st.holder, st.rev, st.at, over, left, st.over)
		}
	}
	sole := Terms{Length: time.Hour, Node: "a", Sole: true}
	if over, _ := sole.Over(&Sighting{}, "b", 1, t0); !over {
		t.Error("on a sole server, another node's lease is not over at once")
	}
}

func TestSightingsAreBounded(t *testing.T) {
	t0 := time.Now()
	terms := Terms{Length: time.Second}
	ss := Sightings{Max: 3}
	for i := range 10 {
		ss.Over(terms, fmt.Sprint(i), "b", 1, t0)
	}
	if len(ss.m) != 3 {
		t.Fatalf("%d sightings kept, want 3", len(ss.m))
	}
	var kept string
	for s := range ss.m {
		kept = s
	}
	if over, _ := ss.Over(terms, kept, "b", 1, t0.Add(time.Second)); !over || len(ss.m) != 2 {
		t.Fatalf("a kept sighting: over %v with %d kept; want over, and dropped", over, len(ss.m))
	}
}

// Acquire takes a stream held by another node only once that node's last append has stayed
// the last for the lease's length, looks again after a refused take, and gives up when a look
// stops it.
func TestAcquire(t *testing.T) {
	terms := Terms{Length: 300 * time.Millisecond, Node: "a"}
	start, takes := time.Now(), 0
	took := terms.Acquire(t.Context(), func(context.Context) Look {
		return Look{Holder: "b", Revision: 7, Found: true}
	}, func(context.Context) error {
		if takes++; takes == 1 {
			return errors.New("refused: another node appended first")
		}
		return nil
	})
	if elapsed := time.Since(start); !took || takes != 2 || elapsed < terms.Length {
		t.Errorf("took %v after %d takes in %v; want it on the second take, after %v", took, takes, elapsed, terms.Length)
	}
	stopped := terms.Acquire(t.Context(), func(context.Context) Look { return Look{Stop: true} }, func(context.Context) error {
		t.Error("a stopped look took the lease")
		return nil
	})
	if stopped {
		t.Error("Acquire reported a lease taken after a look stopped it")
	}
}
