package load

import (
	"net/http"
	"testing"
	"time"
)

// The figures split the answers in the window by command, first runs and replays apart.
func TestStatsByCommand(t *testing.T) {
	from := time.Now()
	ok := reply{status: http.StatusOK, header: http.Header{}}
	replayed := reply{status: http.StatusOK, header: http.Header{"Idempotent-Replayed": {"true"}}}
	var rec recorder
	for i := 1; i <= 100; i++ {
		rec.request("ship", from, from.Add(time.Duration(i)*time.Millisecond), ok)
	}
	rec.request("ship", from, from.Add(time.Millisecond), replayed)
	rec.request("create", from, from.Add(5*time.Millisecond), ok)
	rec.request("create", from, from.Add(time.Hour), ok) // outside the window

	s := stats([]*recorder{&rec}, from, from.Add(time.Second))
	want := []CommandLatency{
		{Command: "create", Answers: 1, Latency: Latency{P50: 5 * time.Millisecond, P95: 5 * time.Millisecond, P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}},
		{Command: "ship", Answers: 100, Latency: Latency{P50: 51 * time.Millisecond, P95: 96 * time.Millisecond, P99: 100 * time.Millisecond, Max: 100 * time.Millisecond}},
		{Command: "ship", Replayed: true, Answers: 1, Latency: Latency{P50: time.Millisecond, P95: time.Millisecond, P99: time.Millisecond, Max: time.Millisecond}},
	}
	if len(s.ByCommand) != len(want) {
		t.Fatalf("by command: %+v, want %+v", s.ByCommand, want)
	}
	for i := range want {
		if s.ByCommand[i] != want[i] {
			t.Errorf("by command [%d]: %+v, want %+v", i, s.ByCommand[i], want[i])
		}
	}
	if s.Requests != 102 || s.Replays != 1 {
		t.Errorf("requests %d, replays %d; want 102, 1", s.Requests, s.Replays)
	}
}
