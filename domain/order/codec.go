package order

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/acme/orders/fault"

	json "github.com/goccy/go-json"
)

// Codec encodes order events as JSON and decodes them by their versioned type name. The event
// store and projections receive a Codec as a value and need no knowledge of the Go types; the
// names come from EventType, never from reflection on Go type names. A Codec is immutable and
// safe for concurrent use; the zero Codec knows no types.
type Codec struct {
	types   map[string]eventType
	current map[string]int // an event type's name without its version → its current version
}

// eventType is a current version (owns is set) or an earlier one (see upcast.go).
type eventType struct {
	owns   func(Event) bool
	decode func([]byte) (Event, error)
}

var (
	// ErrUnknownEventType is returned for a type name (or a Go value) the codec does not know.
	ErrUnknownEventType = fault.New(fault.Unreadable, "", "unknown order event type")
	// ErrNewerEventVersion is returned for a known type at a version newer than the codec's:
	// an event written by a later release, which this one cannot read.
	ErrNewerEventVersion = fault.New(fault.Unreadable, "", "order event of a newer version than this build reads")
)

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
	register[ProviderEventUnapplied],
).with(upcasters...)

// Marshal encodes e with the codec of every event type of this package.
func Marshal(e Event) (typ string, data []byte, err error) { return events.Marshal(e) }

// Unmarshal decodes an event of type typ with the codec of every event type of this package.
func Unmarshal(typ string, data []byte) (Event, error) { return events.Unmarshal(typ, data) }

// Upcast returns a stored event at the current version of its type with the codec of every event type of this package.
func Upcast(typ string, data []byte) (string, []byte, error) { return events.Upcast(typ, data) }

func newCodec(regs ...func(map[string]eventType)) Codec {
	return Codec{types: make(map[string]eventType, len(regs)), current: map[string]int{}}.with(regs...)
}

// with returns c with more types registered: current ones (register) or earlier versions
// (registerEarlier).
func (c Codec) with(regs ...func(map[string]eventType)) Codec {
	for _, reg := range regs {
		reg(c.types)
	}
	for name, t := range c.types {
		if base, v, ok := splitVersion(name); ok && t.owns != nil {
			c.current[base] = v
		}
	}
	return c
}

func register[E Event](types map[string]eventType) {
	var zero E
	types[zero.EventType()] = eventType{
		owns: func(e Event) bool { _, ok := e.(E); return ok },
		decode: func(data []byte) (Event, error) {
			return decodeJSON[E](data)
		},
	}
}

func decodeJSON[T any](data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// splitVersion splits "order.created.v2" into "order.created" and 2.
func splitVersion(name string) (base string, version int, ok bool) {
	i := strings.LastIndex(name, ".v")
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.Atoi(name[i+2:])
	if err != nil || v < 1 {
		return "", 0, false
	}
	return name[:i], v, true
}

// Unversioned is an event type's name without its version: "order.created" for every version of
// "order.created.v2". A name without a version is returned as it is.
func Unversioned(typ string) string {
	if base, _, ok := splitVersion(typ); ok {
		return base
	}
	return typ
}

// Marshal returns e's type name and JSON encoding. It accepts the event values Decide returns;
// a pointer to an event is refused, so that decoding always gives back what was encoded.
func (c Codec) Marshal(e Event) (typ string, data []byte, err error) {
	// Matching by Go type instead of calling e.EventType() keeps a nil pointer from panicking.
	for name, t := range c.types {
		if t.owns != nil && t.owns(e) {
			data, err := json.Marshal(e)
			if err != nil {
				return "", nil, fmt.Errorf("encode %s: %w", name, err)
			}
			return name, data, nil
		}
	}
	return "", nil, fmt.Errorf("encode %T: %w", e, ErrUnknownEventType)
}

// Unmarshal decodes data as an event of type typ, at the current version of its type: an event
// stored at an earlier version is upcast (see upcast.go); the error wraps ErrUpcast if that
// fails. Unknown JSON fields are ignored, so that an optional field added to a type later does
// not break readers of the current version. A type the codec does not know is an error
// (ErrUnknownEventType, or ErrNewerEventVersion for a later version of a known type), never
// skipped: a fold without it would be wrong.
func (c Codec) Unmarshal(typ string, data []byte) (Event, error) {
	t, ok := c.types[typ]
	if !ok {
		if base, v, ok := splitVersion(typ); ok && c.current[base] != 0 && v > c.current[base] {
			return nil, fmt.Errorf("decode %q: %w (it reads %s.v%d)", typ, ErrNewerEventVersion, base, c.current[base])
		}
		return nil, fmt.Errorf("decode %q: %w", typ, ErrUnknownEventType)
	}
	e, err := t.decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", typ, err)
	}
	return e, nil
}

// Upcast returns a stored event as the current version of its type: typ and data as they are
// if typ is current, else the upcast event encoded anew. It fails as Unmarshal does.
func (c Codec) Upcast(typ string, data []byte) (string, []byte, error) {
	if t, ok := c.types[typ]; ok && t.owns != nil {
		return typ, data, nil
	}
	e, err := c.Unmarshal(typ, data)
	if err != nil {
		return "", nil, err
	}
	return c.Marshal(e)
}
