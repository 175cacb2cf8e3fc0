package order

import (
	"errors"
	"fmt"
	"math"
)

// Currency is an ISO 4217 alphabetic currency code such as "EUR".
type Currency string

// Valid reports whether c has the form of an ISO 4217 code: three upper-case ASCII letters.
// Membership in the code list is not checked: the list changes over time, and the payment
// provider, not the order, is the authority on which currencies it accepts.
func (c Currency) Valid() bool {
	if len(c) != 3 {
		return false
	}
	for i := range len(c) {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// Money is an amount in the minor unit of its currency: cents for EUR, yen for JPY. Amounts are
// integers so that sums are exact and never depend on rounding; nothing the aggregate decides
// needs the currency's exponent, so it does not know it.
type Money struct {
	Amount   int64    `json:"amount"`
	Currency Currency `json:"currency"`
}

// Causes reported by Money arithmetic. Decide wraps them in an *Error, so errors.Is finds
// them under the error's Kind.
var (
	ErrOverflow         = errors.New("amount out of int64 range")
	ErrCurrencyMismatch = errors.New("currencies differ")
)

// String formats m as "1299 EUR": the amount stays in minor units, because formatting it as
// "12.99" would need the exponent the aggregate deliberately does not have.
func (m Money) String() string { return fmt.Sprintf("%d %s", m.Amount, m.Currency) }

// Add returns m+n. It fails rather than wrap around, and refuses to add different currencies.
func (m Money) Add(n Money) (Money, error) {
	if m.Currency != n.Currency {
		return Money{}, fmt.Errorf("%s + %s: %w", m, n, ErrCurrencyMismatch)
	}
	if (n.Amount > 0 && m.Amount > math.MaxInt64-n.Amount) ||
		(n.Amount < 0 && m.Amount < math.MinInt64-n.Amount) {
		return Money{}, fmt.Errorf("%s + %s: %w", m, n, ErrOverflow)
	}
	return Money{Amount: m.Amount + n.Amount, Currency: m.Currency}, nil
}

// Sub returns m-n. It fails rather than wrap around, and refuses to mix currencies.
func (m Money) Sub(n Money) (Money, error) {
	if m.Currency != n.Currency {
		return Money{}, fmt.Errorf("%s - %s: %w", m, n, ErrCurrencyMismatch)
	}
	if (n.Amount < 0 && m.Amount > math.MaxInt64+n.Amount) ||
		(n.Amount > 0 && m.Amount < math.MinInt64+n.Amount) {
		return Money{}, fmt.Errorf("%s - %s: %w", m, n, ErrOverflow)
	}
	return Money{Amount: m.Amount - n.Amount, Currency: m.Currency}, nil
}

// Mul returns m×n, as for a unit price times a quantity. It fails rather than wrap around.
func (m Money) Mul(n int64) (Money, error) {
	r := m.Amount * n
	// Dividing back detects every overflow except -1 × MinInt64, whose wrapped result divides
	// back to itself.
	if m.Amount != 0 && (r/m.Amount != n || (m.Amount == -1 && n == math.MinInt64)) {
		return Money{}, fmt.Errorf("%s × %d: %w", m, n, ErrOverflow)
	}
	return Money{Amount: r, Currency: m.Currency}, nil
}
