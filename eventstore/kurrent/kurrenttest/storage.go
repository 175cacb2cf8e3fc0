package kurrenttest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// The embedded store holds each KurrentDB event under an id of its own, so that it never
// refuses an id that KurrentDB would store twice, with the KurrentDB event's id, content type and
// custom metadata in an envelope in its metadata. Data that is not JSON is kept as a base64 JSON
// string.
type envelope struct {
	ID          uuid.UUID `json:"id"`
	ContentType string    `json:"contentType,omitempty"`
	Custom      []byte    `json:"custom,omitempty"`
	Binary      bool      `json:"binary,omitempty"`
}

// stored is a KurrentDB event as read back from storage.
type stored struct {
	id          uuid.UUID
	stream      string
	revision    uint64
	position    uint64
	typ         string
	contentType string
	data        []byte
	custom      []byte
	created     time.Time
}

func encode(ev proposed) eventstore.EventData {
	env := envelope{ID: ev.id, ContentType: ev.contentType, Custom: ev.custom}
	data := ev.data
	if !json.Valid(data) {
		env.Binary = true
		data, _ = json.Marshal(ev.data) // []byte marshals as a base64 string
	}
	meta, _ := json.Marshal(env)
	return eventstore.EventData{ID: uuid.New(), Type: ev.typ, Data: data, Metadata: meta}
}

func decode(rec eventstore.RecordedEvent) (stored, error) {
	var env envelope
	if err := json.Unmarshal(rec.Metadata, &env); err != nil {
		return stored{}, fmt.Errorf("event %s@%d: envelope: %w", rec.Stream, rec.Revision, err)
	}
	data := rec.Data
	if env.Binary {
		if err := json.Unmarshal(rec.Data, &data); err != nil {
			return stored{}, fmt.Errorf("event %s@%d: data: %w", rec.Stream, rec.Revision, err)
		}
	}
	return stored{
		id:          env.ID,
		stream:      rec.Stream,
		revision:    rec.Revision,
		position:    rec.Position.Commit,
		typ:         rec.Type,
		contentType: env.ContentType,
		data:        data,
		custom:      env.Custom,
		created:     rec.Recorded,
	}, nil
}
