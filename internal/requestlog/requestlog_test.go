package requestlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/acme/orders/internal/requestlog"
)

// A line logged with a request's context carries its id and principal as they are when it is
// logged, through loggers derived with attributes or groups too; a line logged without one
// carries neither; the steps of the request's key ride on its lines once taken; wrapping a logger twice adds them once.
func TestLinesNameTheirRequest(t *testing.T) {
	var buf bytes.Buffer
	log := requestlog.Logger(slog.New(slog.NewJSONHandler(&buf, nil)))
	if requestlog.Logger(log) != log {
		t.Error("a logger that names requests already was wrapped again")
	}
	r := &requestlog.Request{ID: "req-1"}
	ctx := context.WithValue(context.Background(), requestlog.Key{}, r)
	if requestlog.FromContext(ctx) != r || requestlog.FromContext(context.Background()) != nil {
		t.Fatal("FromContext does not find the request, or finds one where there is none")
	}

	log.InfoContext(ctx, "before authentication")
	r.Principal = "alice"
	log.With("step", "s").WithGroup("g").InfoContext(ctx, "derived", "k", "v")
	log.InfoContext(context.Background(), "outside a request")
	r.Step("abc", "claimed")
	r.Step("abc", "completed")
	log.InfoContext(ctx, "request")

	want := []map[string]any{
		{"msg": "before authentication", "request_id": "req-1", "principal": ""},
		{"msg": "derived", "step": "s", "g": map[string]any{"k": "v", "request_id": "req-1", "principal": "alice"}},
		{"msg": "outside a request"},
		{"msg": "request", "request_id": "req-1", "principal": "alice", "key_hash": "abc", "key": "claimed completed"},
	}
	d := json.NewDecoder(&buf)
	for i, w := range want {
		var line map[string]any
		if err := d.Decode(&line); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		delete(line, "time")
		delete(line, "level")
		got, _ := json.Marshal(line)
		wantJSON, _ := json.Marshal(w)
		if !bytes.Equal(got, wantJSON) {
			t.Errorf("line %d: %s\nwant %s", i, got, wantJSON)
		}
	}
}
