package order

import (
	"encoding/json"
	"iter"
	"math"
	"sync"
)

// Charges are an order's duplicate charges (see DuplicateChargeRecorded), in the order they
// were recorded. The zero Charges holds none.
//
// Charges is a value, as State is: Add returns new Charges and leaves the receiver as it
// was. An order records every duplicate charge, however many, so Add and Recorded take
// constant time: the Charges of an order's successive States share one append-only log and
// each sees the part of it that was there when it was made. Add to the latest Charges of a
// log appends to the log; Add to earlier ones (a State evolved along a second path) first
// copies their part into a log of their own. Charges are safe for concurrent use.
type Charges struct {
	log   *chargeLog // nil for none
	n     int        // these Charges are log.items[:n]
	total Money      // the sum of their amounts
}

// chargeLog is what Charges share. Its items are never changed once appended, so a reader
// may go through items[:n] without the lock once it has read the slice under it.
type chargeLog struct {
	mu    sync.RWMutex
	items []Charge
	first map[string]int // payment id → index of its first charge
}

// NewCharges returns the Charges cs, in that order.
func NewCharges(cs ...Charge) Charges {
	var c Charges
	for _, ch := range cs {
		c = c.Add(ch)
	}
	return c
}

// Add returns c with ch recorded after the others.
func (c Charges) Add(ch Charge) Charges {
	total := ch.Amount
	if c.n > 0 {
		var err error
		if total, err = c.total.Add(ch.Amount); err != nil {
			// Unreachable for decided events; a sum that cannot be represented saturates, so
			// that a corrupt stream never owes less than it records.
			total = Money{Amount: math.MaxInt64, Currency: c.total.Currency}
		}
	}
	if c.log != nil && c.log.append(c.n, ch) {
		return Charges{log: c.log, n: c.n + 1, total: total}
	}
	l := &chargeLog{items: make([]Charge, c.n, c.n+1), first: make(map[string]int, c.n+1)}
	for i, old := range c.items() {
		l.items[i] = old
		l.note(old.PaymentID, i)
	}
	l.items = append(l.items, ch)
	l.note(ch.PaymentID, c.n)
	return Charges{log: l, n: c.n + 1, total: total}
}

// append appends ch if the log has exactly n items, and reports whether it did.
func (l *chargeLog) append(n int, ch Charge) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.items) != n {
		return false
	}
	l.items = append(l.items, ch)
	l.note(ch.PaymentID, n)
	return true
}

func (l *chargeLog) note(paymentID string, i int) {
	if _, ok := l.first[paymentID]; !ok {
		l.first[paymentID] = i
	}
}

func (c Charges) items() []Charge {
	if c.log == nil {
		return nil
	}
	c.log.mu.RLock()
	defer c.log.mu.RUnlock()
	return c.log.items[:c.n:c.n]
}

// Len returns how many charges c holds.
func (c Charges) Len() int { return c.n }

// Total returns the sum of the charges' amounts: the money to return to the customer. It is
// the zero Money when there are none.
func (c Charges) Total() Money { return c.total }

// Recorded reports whether c holds a charge of payment paymentID.
func (c Charges) Recorded(paymentID string) bool {
	if c.log == nil {
		return false
	}
	c.log.mu.RLock()
	defer c.log.mu.RUnlock()
	i, ok := c.log.first[paymentID]
	return ok && i < c.n
}

// All yields the charges in the order they were recorded.
func (c Charges) All() iter.Seq[Charge] {
	items := c.items()
	return func(yield func(Charge) bool) {
		for _, ch := range items {
			if !yield(ch) {
				return
			}
		}
	}
}

// Equal reports whether c and d hold the same charges in the same order.
func (c Charges) Equal(d Charges) bool {
	a, b := c.items(), d.items()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.PaymentID != y.PaymentID || x.Amount != y.Amount || x.Reason != y.Reason || !x.At.Equal(y.At) {
			return false
		}
	}
	return true
}

// MarshalJSON encodes c as the array of its charges (null for none), as the []Charge that
// States held before: read models keep States as JSON.
func (c Charges) MarshalJSON() ([]byte, error) {
	items := c.items()
	if len(items) == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(items)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (c *Charges) UnmarshalJSON(b []byte) error {
	var items []Charge
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	*c = NewCharges(items...)
	return nil
}
