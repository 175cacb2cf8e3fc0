package audit

import (
	"context"
	"fmt"
	"iter"
	"sort"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
)

// CheckStream verifies one order's stream as Verify verifies each stream of the log: its
// hash chain, the order of its revisions and the invariants of its fold. Its findings are
// sorted by revision; the first chain finding is where the chain breaks. It fails only when
// the stream cannot be read, and with eventstore.ErrStreamNotFound if there is no such stream.
func CheckStream(ctx context.Context, events iter.Seq2[eventstore.RecordedEvent, error]) ([]Finding, error) {
	st := &stream{lastHash: command.Genesis}
	var out []Finding
	var name string
	for e, err := range events {
		if err != nil {
			return nil, fmt.Errorf("read the stream: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name = e.Stream
		found, _ := st.check(e)
		out = append(out, found...)
		st.last = e.Position
	}
	out = append(out, st.finish(name)...)
	for rev := range st.gaps {
		out = append(out, Finding{Kind: KindMissing, Stream: name, Revision: rev, Detail: fmt.Sprintf("revision %d is not in the stream", rev)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// Chain reports whether kind is a finding of the hash chain (tampered, broken link,
// unchained), as opposed to the order of the revisions or the fold.
func Chain(kind string) bool {
	return kind == KindTampered || kind == KindBrokenLink || kind == KindUnchained
}
