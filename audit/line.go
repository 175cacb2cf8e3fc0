package audit

import (
	"encoding/json"
	"time"

	"github.com/acme/orders/eventstore"
)

// Line is an event as the audit tools export it, one JSON object a line ('api audit export',
// 'api audit history --format jsonl', the console's export of an order): its stream, where it
// is, and its data and metadata as stored.
type Line struct {
	Stream     string          `json:"stream"`
	Revision   uint64          `json:"revision"`
	Position   uint64          `json:"position"`
	Type       string          `json:"type"`
	StoredType string          `json:"storedType,omitempty"` // history: only if Type is an upcast of it
	RecordedAt time.Time       `json:"recordedAt"`
	Data       json.RawMessage `json:"data"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// LineOf is e as a Line.
func LineOf(e eventstore.RecordedEvent) Line {
	l := Line{Stream: e.Stream, Revision: e.Revision, Position: e.Position.Commit, Type: e.Type, RecordedAt: e.Recorded, Data: e.Data}
	if len(e.Metadata) > 0 {
		l.Metadata = e.Metadata
	}
	return l
}
