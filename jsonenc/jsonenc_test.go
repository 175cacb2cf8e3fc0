package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/acme/orders/jsonenc"
	"github.com/acme/orders/jsonenc/jsonenctest"
)

func TestStringIsEncodingJSONs(t *testing.T) {
	for _, s := range jsonenctest.Strings(rand.New(rand.NewPCG(1, 2)), 2000) {
		want, _ := json.Marshal(s)
		if got := jsonenc.String(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("String(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range jsonenctest.Strings(rand.New(rand.NewPCG(3, 4)), 20) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonenc.String([]byte("prefix"), s); !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("String(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

type sample struct {
	A string            `json:"a"`
	B string            `json:"b,omitempty"`
	N int64             `json:"n"`
	M int64             `json:"m,omitempty"`
	H map[string]string `json:"h,omitempty"`
	T time.Time         `json:"t"`
	R []int64           `json:"r"`
}

func (s sample) appendJSON(dst []byte) ([]byte, error) {
	o := jsonenc.Open(dst)
	o.String("a", s.A)
	o.StringOmitEmpty("b", s.B)
	o.Int("n", s.N)
	o.IntOmitEmpty("m", s.M)
	o.StringMapOmitEmpty("h", s.H)
	o.Time("t", s.T)
	o.Raw("r", func(b []byte) []byte {
		return jsonenc.Array(b, s.R, func(n int64, b []byte) []byte { return strconv.AppendInt(b, n, 10) })
	})
	return o.Close()
}

func TestObjectIsEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	strs := jsonenctest.Strings(r, 500)
	pick := func() string { return strs[r.IntN(len(strs))] }
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600), time.Local}
	for i := range 3000 {
		s := sample{A: pick(), B: pick(), N: r.Int64() - r.Int64(), M: int64(r.IntN(3) - 1),
			T: time.Unix(r.Int64N(1<<35)-1<<34, r.Int64N(2e9)*int64(r.IntN(2))).In(zones[r.IntN(len(zones))]),
			R: [][]int64{nil, {}, {int64(i)}, {int64(i), -1}}[i%4]}
		if i%7 == 0 {
			s.T = time.Time{}
		}
		if n := r.IntN(12); n > 0 {
			s.H = map[string]string{}
			for range n {
				s.H[pick()] = pick()
			}
		}
		want, wantErr := json.Marshal(s)
		got, err := s.appendJSON(nil)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%+v:\n got %s (%v)\nwant %s (%v)", s, got, err, want, wantErr)
		}
	}
}

func TestTimeOutOfRangeIsAnError(t *testing.T) {
	o := jsonenc.Open(nil)
	o.Time("t", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := o.Close(); err == nil {
		t.Fatal("a year past 9999 was encoded")
	}
}
