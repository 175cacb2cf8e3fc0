package order_test

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/acme/orders/domain/order"
	"pgregory.net/rapid"
)

func TestCurrencyValid(t *testing.T) {
	for c, want := range map[order.Currency]bool{
		"EUR": true, "USD": true, "JPY": true, "XXX": true,
		"": false, "EU": false, "EURO": false, "eur": false, "Eur": false, "EU1": false,
		"E R": false, "ÉUR": false, "\x00UR": false,
	} {
		if got := c.Valid(); got != want {
			t.Errorf("Currency(%q).Valid() = %v, want %v", c, got, want)
		}
	}
}

func TestMoneyArithmetic(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	usd := func(a int64) order.Money { return order.Money{Amount: a, Currency: "USD"} }
	tests := []struct {
		name string
		op   func() (order.Money, error)
		want order.Money
		err  error
	}{
		{"add", func() (order.Money, error) { return eur(2).Add(eur(3)) }, eur(5), nil},
		{"add negative", func() (order.Money, error) { return eur(2).Add(eur(-3)) }, eur(-1), nil},
		{"add to max", func() (order.Money, error) { return eur(hi - 1).Add(eur(1)) }, eur(hi), nil},
		{"add past max", func() (order.Money, error) { return eur(hi).Add(eur(1)) }, order.Money{}, order.ErrOverflow},
		{"add max to max", func() (order.Money, error) { return eur(hi).Add(eur(hi)) }, order.Money{}, order.ErrOverflow},
		{"add past min", func() (order.Money, error) { return eur(lo).Add(eur(-1)) }, order.Money{}, order.ErrOverflow},
		{"add min and max", func() (order.Money, error) { return eur(lo).Add(eur(hi)) }, eur(-1), nil},
		{"add currencies", func() (order.Money, error) { return eur(1).Add(usd(1)) }, order.Money{}, order.ErrCurrencyMismatch},
		{"sub", func() (order.Money, error) { return eur(2).Sub(eur(3)) }, eur(-1), nil},
		{"sub to min", func() (order.Money, error) { return eur(lo + 1).Sub(eur(1)) }, eur(lo), nil},
		{"sub past min", func() (order.Money, error) { return eur(lo).Sub(eur(1)) }, order.Money{}, order.ErrOverflow},
		{"sub min from 0", func() (order.Money, error) { return eur(0).Sub(eur(lo)) }, order.Money{}, order.ErrOverflow},
		{"sub min from -1", func() (order.Money, error) { return eur(-1).Sub(eur(lo)) }, eur(hi), nil},
		{"sub past max", func() (order.Money, error) { return eur(hi).Sub(eur(-1)) }, order.Money{}, order.ErrOverflow},
		{"sub currencies", func() (order.Money, error) { return usd(1).Sub(eur(1)) }, order.Money{}, order.ErrCurrencyMismatch},
		{"mul", func() (order.Money, error) { return eur(250).Mul(4) }, eur(1000), nil},
		{"mul by 0", func() (order.Money, error) { return eur(hi).Mul(0) }, eur(0), nil},
		{"mul 0", func() (order.Money, error) { return eur(0).Mul(lo) }, eur(0), nil},
		{"mul largest line", func() (order.Money, error) { return eur(order.MaxUnitPrice).Mul(order.MaxQuantity) }, eur(order.MaxUnitPrice * order.MaxQuantity), nil},
		{"mul past max", func() (order.Money, error) { return eur(hi/2 + 1).Mul(2) }, order.Money{}, order.ErrOverflow},
		{"mul max by -1", func() (order.Money, error) { return eur(hi).Mul(-1) }, eur(-hi), nil},
		{"mul min by -1", func() (order.Money, error) { return eur(lo).Mul(-1) }, order.Money{}, order.ErrOverflow},
		{"mul -1 by min", func() (order.Money, error) { return eur(-1).Mul(lo) }, order.Money{}, order.ErrOverflow},
		{"mul min by 1", func() (order.Money, error) { return eur(lo).Mul(1) }, eur(lo), nil},
		{"mul wraps to positive", func() (order.Money, error) { return eur(1 << 32).Mul(1 << 32) }, order.Money{}, order.ErrOverflow},
	}
	for _, tt := range tests {
		got, err := tt.op()
		if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
		}
		if got != tt.want {
			t.Errorf("%s: = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := eur(1299).String(); got != "1299 EUR" {
		t.Errorf("String() = %q", got)
	}
}

// Checked arithmetic must agree with exact arithmetic: the right answer, or an overflow error
// exactly when the exact answer does not fit.
func TestMoneyMatchesBigInt(t *testing.T) {
	edge := rapid.OneOf(
		rapid.Int64(),
		rapid.SampledFrom([]int64{0, 1, -1, 2, -2, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 32, -(1 << 32), 3037000499, 3037000500}),
	)
	rapid.Check(t, func(t *rapid.T) {
		a, b := edge.Draw(t, "a"), edge.Draw(t, "b")
		check := func(op string, got order.Money, err error, exact *big.Int) {
			fits := exact.IsInt64()
			switch {
			case fits && (err != nil || got.Amount != exact.Int64() || got.Currency != "EUR"):
				t.Fatalf("%d %s %d = %v, %v; want %s", a, op, b, got, err, exact)
			case !fits && !errors.Is(err, order.ErrOverflow):
				t.Fatalf("%d %s %d = %v, %v; want overflow (%s)", a, op, b, got, err, exact)
			}
		}
		x, y := big.NewInt(a), big.NewInt(b)
		sum, err := eur(a).Add(eur(b))
		check("+", sum, err, new(big.Int).Add(x, y))
		diff, err := eur(a).Sub(eur(b))
		check("-", diff, err, new(big.Int).Sub(x, y))
		prod, err := eur(a).Mul(b)
		check("×", prod, err, new(big.Int).Mul(x, y))
	})
}

func TestInCurrencyFillsOnlyMissingCurrencies(t *testing.T) {
	got := order.InCurrency(order.AddLine{SKU: "a", Quantity: 1, UnitPrice: order.Money{Amount: 5}}, "EUR")
	if got.(order.AddLine).UnitPrice.Currency != "EUR" {
		t.Errorf("AddLine without currency: got %+v", got)
	}
	got = order.InCurrency(order.ConfirmPayment{PaymentID: "p", Amount: order.Money{Amount: 5, Currency: "USD"}}, "EUR")
	if got.(order.ConfirmPayment).Amount.Currency != "USD" {
		t.Errorf("a named currency must stay: got %+v", got)
	}
	for _, c := range []order.Command{order.StartPayment{}, order.RequestRefund{}} {
		if got := order.InCurrency(c, "EUR"); got == c {
			t.Errorf("%T: currency not filled", c)
		}
	}
}
