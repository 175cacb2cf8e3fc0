package projections

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// Projection is a read model kept from the log.
type Projection interface {
	// Name identifies the projection; it is stored with its checkpoint.
	Name() string
	// Version numbers what its tables look like and hold. Raise it whenever Create or Apply
	// change either: a runner that finds the live generation written at another version
	// rebuilds it from the log (see the package doc).
	Version() int
	// Filter selects the events it applies. The runner still reads every event, so that its
	// checkpoint passes the others too and WaitFor can tell when it has seen a position.
	Filter() eventstore.Filter
	// Tables are the base names of its tables; queries read them under these names.
	Tables() []string
	// Create creates its tables, named by t, and their indexes (whose names must contain
	// the table names, so that generations do not collide).
	Create(ctx context.Context, tx *sql.Tx, t Tables) error
	// Apply applies a batch of events, in log order, to the tables named by t. The slice is
	// the runner's, reused for the next batch: Apply must not keep it.
	Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error
}

// Selective is a Projection that folds only some event types of the streams its Filter
// selects. The runner hands Apply only those, and a live batch without any commits nothing:
// the checkpoint moves in memory, and reaches the file with the next batch that writes, or
// once ten BatchSizes of events have passed so (see run.skip). A restart applies from the
// stored checkpoint, so it meets the events skipped since then again, and skips them again.
type Selective interface {
	Projection
	// Applies reports whether Apply folds events of type typ. It must hold for every version
	// of a type Apply folds, so that one this build cannot read reaches Apply and stops the
	// projection instead of being skipped.
	Applies(typ string) bool
}

// applies returns p's Applies, or one that takes every type.
func applies(p Projection) func(string) bool {
	if s, ok := p.(Selective); ok {
		return s.Applies
	}
	return func(string) bool { return true }
}

// Tables maps a projection's table base names to the tables of one generation.
type Tables map[string]string

func tablesOf(p Projection, generation int) Tables {
	t := Tables{}
	for _, name := range p.Tables() {
		t[name] = fmt.Sprintf("%s_g%d", name, generation)
	}
	return t
}

// State is what a projection is doing.
type State string

const (
	StateCatchingUp State = "catching-up"
	StateLive       State = "live"
	StateRebuilding State = "rebuilding"
	StateFailed     State = "failed"
	StateStopped    State = "stopped"
)

// Status is a projection's progress.
type Status struct {
	Name       string              `json:"name"`
	State      State               `json:"state"`
	Error      string              `json:"error,omitempty"`
	Generation int                 `json:"generation"`
	Checkpoint eventstore.Position `json:"-"`
	Head       eventstore.Position `json:"-"`
	// LagEvents approximates the events between checkpoint and head by their positions,
	// which are gap-tolerant sequence numbers on the embedded store.
	LagEvents  uint64  `json:"lagEvents"`
	LagSeconds float64 `json:"lagSeconds"`
	// Rebuild is the progress of a rebuild in progress.
	Rebuild *RebuildStatus `json:"rebuild,omitempty"`
	// Comparison is the last comparison of a rebuild asked to compare (see RebuildOptions)
	// since the process started.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// RebuildStatus is the progress of a rebuild.
type RebuildStatus struct {
	Generation int                 `json:"generation"`
	Checkpoint eventstore.Position `json:"-"`
	Applied    uint64              `json:"applied"` // events applied by this process's run of it
	Started    time.Time           `json:"started"`
	RebuildOptions
}

// RebuildOptions say what a rebuild does once its generation has caught up with the live one.
type RebuildOptions struct {
	// Compare compares the two generations' rows first (see Comparison), at the same log
	// position: the result is in the projection's Status.
	Compare bool `json:"compare"`
	// Swap makes the rebuilt generation live. A compared generation that is not swapped is
	// dropped: the live one stays as it was (a dry run). A rebuild that does not compare
	// always swaps.
	Swap bool `json:"swap"`
}

// mode is how RebuildOptions are stored with a rebuild in progress, so that a resumed rebuild
// does what was asked (NULL: swap without comparing, as rebuilds from before options did).
func (o RebuildOptions) mode() any {
	switch {
	case !o.Compare:
		return nil
	case o.Swap:
		return "compare-swap"
	}
	return "compare"
}

func optionsOf(mode sql.NullString) RebuildOptions {
	return RebuildOptions{Compare: mode.Valid, Swap: !mode.Valid || mode.String == "compare-swap"}
}
