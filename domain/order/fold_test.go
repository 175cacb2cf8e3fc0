package order_test

import (
	"fmt"
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

// BenchmarkFoldDuplicateCharges folds a paid order with n duplicate charges and then decides
// one more confirmation on it, as a command does: loading folds with a Folder; Evolve is the
// fold of the read model and of tests.
func BenchmarkFoldDuplicateCharges(b *testing.B) {
	for _, n := range []int{8_000, 32_000} {
		events := hPaid()
		for i := range n {
			events = append(events, dup(fmt.Sprint("dup-", i), 1000, order.ChargeAlreadyPaid))
		}
		confirm := order.ConfirmPayment{PaymentID: "dup-last", Amount: eur(1000)}
		check := func(b *testing.B, s order.State) {
			if s.Version != int64(len(events)) {
				b.Fatalf("folded version %d, want %d", s.Version, len(events))
			}
			if evs, _ := order.Decide(s, confirm, now); len(evs) != 1 {
				b.Fatalf("decided %v, want the charge recorded", evs)
			}
		}
		b.Run(fmt.Sprintf("n=%d/Folder", n), func(b *testing.B) {
			for b.Loop() {
				var f order.Folder
				for _, e := range events {
					f.Apply(e)
				}
				check(b, f.State())
			}
		})
		b.Run(fmt.Sprintf("n=%d/Evolve", n), func(b *testing.B) {
			for b.Loop() {
				check(b, fold(events))
			}
		})
	}
}
