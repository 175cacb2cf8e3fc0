package load

import "testing"

func TestPanicked(t *testing.T) {
	for _, c := range []struct {
		log  string
		want bool
	}{
		{"{\"msg\":\"request\",\"request_id\":\"xQpanicZ3\"}\n", false},
		{"{\"msg\":\"serving\"}\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:\n", true},
		{"2026/11/29 12:00:00 http: panic serving 127.0.0.1:5000: boom\ngoroutine 7 [running]:\n", true},
		{"", false},
	} {
		if got := Panicked([]byte(c.log)); got != c.want {
			t.Errorf("Panicked(%q) = %v, want %v", c.log, got, c.want)
		}
	}
}
