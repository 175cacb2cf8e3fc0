package order_test

import (
	"testing"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// A Folder folds to the same States as Evolve, and States it handed out never change.
func TestFolderFoldsLikeEvolve(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f order.Folder
		var want order.State
		type kept struct{ got, want, copy order.State }
		var handedOut []kept
		for range rapid.IntRange(0, 40).Draw(t, "events") {
			e := anyEvent().Draw(t, "event")
			f.Apply(e)
			want = order.Evolve(want, e)
			if rapid.Bool().Draw(t, "look") {
				got := f.State()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("Folder and Evolve differ (-Evolve +Folder):\n%s", diff)
				}
				handedOut = append(handedOut, kept{got, want, deepCopy(got)})
			}
		}
		if diff := cmp.Diff(want, f.State()); diff != "" {
			t.Fatalf("Folder and Evolve differ at the end (-Evolve +Folder):\n%s", diff)
		}
		for _, k := range handedOut {
			if diff := cmp.Diff(k.copy, k.got); diff != "" {
				t.Fatalf("a State the Folder handed out changed later:\n%s", diff)
			}
		}
	})
}
