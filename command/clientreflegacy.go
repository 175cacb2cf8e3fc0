package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// NoLegacyClientRefsStream is the stream whose one event says that the store holds no legacy
// client-reference claim (one named by customer and reference alone, see clientRefClaim), so
// that a create need not read the legacy stream of its reference. It starts with
// ClientRefPrefix but is no claim stream: those end in a SHA-256 in hex.
const NoLegacyClientRefsStream = ClientRefPrefix + "legacy-none"

// TypeNoLegacyClientRefs is the event of NoLegacyClientRefsStream.
const TypeNoLegacyClientRefs = "client-reference.legacy-none.v1"

// NoLegacyClientRefs says that the store holds no legacy client-reference claim.
type NoLegacyClientRefs struct {
	// ClaimsScanned is how many client-reference claims the scan of the log that wrote it read.
	ClaimsScanned int `json:"claimsScanned"`
}

// LegacyScan is what ScanLegacyClientRefs found.
type LegacyScan struct {
	// None is set when the store holds no legacy claim: the marker was there, or was written.
	// From then on the handler's creates read no legacy claim stream.
	None bool
	// Written is set when the scan wrote the marker.
	Written bool
	// Claims is how many client-reference claims the scan read; none if it found the marker.
	Claims int
	// Legacy is the first legacy claim found, if any (None is then false).
	Legacy *eventstore.RecordedEvent
}

// ScanLegacyClientRefs tells the handler whether its store can hold a legacy client-reference
// claim. Until it says no, every create with a client reference reads the legacy stream of its
// customer and reference (see clientRefClaim); once it does, none does, and the handler never
// reads the legacy streams again.
//
// It reads the marker, NoLegacyClientRefsStream. If there is none it reads every
// client-reference claim in the log (feed), up to the first without a principal; if it finds
// none, it appends the marker with expected revision NoStream. On a new store that is at once.
//
// Appending the marker after the scan is sound because nothing appends a legacy claim any more:
// no release since claims became per principal writes one, so every legacy claim
// a store holds was committed before the scan began, and the scan, which reads the log to its
// end, meets it. NoStream only settles which of several nodes' scans writes the marker (the
// same event id, so a repeat is recognised). A node of a release with legacy claims sharing a
// KurrentDB with this one could still append a legacy claim after the scan; such a mix breaks
// the guarantee the other way already (that node reads no per-principal claim, so it lets
// through a reference another node's order holds), so a cluster is upgraded past legacy claims
// as a whole.
func (h *Handler) ScanLegacyClientRefs(ctx context.Context, feed eventstore.Feed) (LegacyScan, error) {
	marked, err := h.noLegacyMarker(ctx)
	if err != nil {
		return LegacyScan{}, err
	}
	if marked {
		h.noLegacyRefs.Store(true)
		return LegacyScan{None: true}, nil
	}
	scan, err := scanLegacyClaims(ctx, feed)
	if err != nil || !scan.None {
		return scan, err
	}
	data, err := json.Marshal(NoLegacyClientRefs{ClaimsScanned: scan.Claims})
	if err != nil {
		return LegacyScan{}, err
	}
	id := uuid.NewSHA1(eventIDSpace, []byte(NoLegacyClientRefsStream))
	res, err := h.Store.Append(ctx, NoLegacyClientRefsStream, eventstore.NoStream, eventstore.EventData{ID: id, Type: TypeNoLegacyClientRefs, Data: data})
	switch {
	case err == nil:
		scan.Written = res.Fate != eventstore.FateRepeated
	case !errors.Is(err, eventstore.ErrWrongExpectedRevision): // else another node wrote it
		return LegacyScan{}, fmt.Errorf("append %s: %w", NoLegacyClientRefsStream, err)
	}
	h.noLegacyRefs.Store(true)
	return scan, nil
}

// noLegacyMarker reports whether the store holds the marker NoLegacyClientRefsStream.
func (h *Handler) noLegacyMarker(ctx context.Context) (bool, error) {
	e, found, err := eventstore.First(ctx, h.Store, NoLegacyClientRefsStream)
	if err == nil && found && e.Type != TypeNoLegacyClientRefs {
		err = fmt.Errorf("read %s: event of type %q", NoLegacyClientRefsStream, e.Type)
	}
	return found && err == nil, err
}

// scanLegacyClaims reads the client-reference claims of the log up to the first legacy one.
// A claim it cannot decode counts as legacy: it might be one.
func scanLegacyClaims(ctx context.Context, feed eventstore.Feed) (LegacyScan, error) {
	scan := LegacyScan{None: true}
	opts := eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{ClientRefPrefix}}}
	for e, err := range feed.ReadAll(ctx, opts) {
		if err != nil {
			return LegacyScan{}, fmt.Errorf("scan client-reference claims: %w", err)
		}
		if e.Type != TypeClientRefClaimed {
			continue
		}
		scan.Claims++
		var c ClientRefClaimed
		if err := json.Unmarshal(e.Data, &c); err != nil || c.Principal == "" {
			scan.None, scan.Legacy = false, &e
			return scan, nil
		}
	}
	return scan, nil
}
