package order

import (
	"errors"
	"fmt"
	json "github.com/goccy/go-json"
	"slices"
)

// Codec encodes order events as JSON and decodes them by their versioned type name. The event
// store and projections receive a Codec as a value and need no knowledge of the Go types; the
// names come from EventType, never from reflection on Go type names. A Codec is immutable and
// safe for concurrent use; the zero Codec knows no types.
type Codec struct {
	types map[string]eventType
}

type eventType struct {
	owns   func(Event) bool
	decode func([]byte) (Event, error)
}

// ErrUnknownEventType is returned for a type name (or a Go value) the codec does not know.
var ErrUnknownEventType = errors.New("unknown order event type")

var events = newCodec(
	register[Created],
	register[LineAdded],
	register[LineQuantityChanged],
	register[LineRemoved],
	register[PaymentStarted],
	register[PaymentConfirmed],
	register[PaymentFailed],
	register[Cancelled],
	register[Shipped],
	register[RefundRequested],
	register[RefundCompleted],
	register[DuplicateChargeRecorded],
)

// Events returns the codec for every event type of this package.
func Events() Codec { return events }

// Marshal encodes e with Events().
func Marshal(e Event) (typ string, data []byte, err error) { return events.Marshal(e) }

// Unmarshal decodes an event of type typ with Events().
func Unmarshal(typ string, data []byte) (Event, error) { return events.Unmarshal(typ, data) }

func newCodec(regs ...func(map[string]eventType)) Codec {
	c := Codec{types: make(map[string]eventType, len(regs))}
	for _, reg := range regs {
		reg(c.types)
	}
	return c
}

func register[E Event](types map[string]eventType) {
	var zero E
	types[zero.EventType()] = eventType{
		owns: func(e Event) bool { _, ok := e.(E); return ok },
		decode: func(data []byte) (Event, error) {
			var e E
			if err := json.Unmarshal(data, &e); err != nil {
				return nil, err
			}
			return e, nil
		},
	}
}

// Marshal returns e's type name and JSON encoding. It accepts the event values Decide returns;
// a pointer to an event is refused, so that decoding always gives back what was encoded.
func (c Codec) Marshal(e Event) (typ string, data []byte, err error) {
	// Matching by Go type instead of calling e.EventType() keeps a nil pointer from panicking.
	for name, t := range c.types {
		if t.owns(e) {
			data, err := json.Marshal(e)
			if err != nil {
				return "", nil, fmt.Errorf("encode %s: %w", name, err)
			}
			return name, data, nil
		}
	}
	return "", nil, fmt.Errorf("encode %T: %w", e, ErrUnknownEventType)
}

// Unmarshal decodes data as an event of type typ. Unknown JSON fields are ignored, so that an
// optional field added to a type later does not break readers of the current version.
func (c Codec) Unmarshal(typ string, data []byte) (Event, error) {
	t, ok := c.types[typ]
	if !ok {
		return nil, fmt.Errorf("decode %q: %w", typ, ErrUnknownEventType)
	}
	e, err := t.decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", typ, err)
	}
	return e, nil
}

// Types returns the type names the codec knows, sorted.
func (c Codec) Types() []string {
	names := make([]string, 0, len(c.types))
	for name := range c.types {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
