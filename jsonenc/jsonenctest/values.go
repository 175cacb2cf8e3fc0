package jsonenctest

import (
	"math/rand/v2"
	"time"
)

// Values draws the field values of an encoder's comparison test: strings from Strings, a
// third of them empty; integers zero or of either sign up to 2^40; times with and without a
// fraction of a second, in zones of whole and half hours.
type Values struct {
	r    *rand.Rand
	strs []string
}

// NewValues draws from r, with n random strings besides Strings' fixed ones.
func NewValues(r *rand.Rand, n int) *Values { return &Values{r: r, strs: Strings(r, n)} }

// String returns a string, empty a third of the time.
func (v *Values) String() string {
	if v.r.IntN(3) == 0 {
		return ""
	}
	return v.strs[v.r.IntN(len(v.strs))]
}

// Int returns zero a third of the time, else a positive or negative integer.
func (v *Values) Int() int64 { return int64(v.r.IntN(3)-1) * v.r.Int64N(1<<40) }

// Time returns a time of year 1970 to 2514.
func (v *Values) Time() time.Time {
	return time.Unix(v.r.Int64N(1<<34), v.r.Int64N(1e9)*int64(v.r.IntN(2))).In(time.FixedZone("z", 1800*(v.r.IntN(9)-4)))
}
