package api_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/orders/api"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

// poisoned is a projection that fails on the first event of type "poison".
type poisoned struct{}

func (poisoned) Name() string              { return "poisoned" }
func (poisoned) Filter() eventstore.Filter { return eventstore.Filter{} }
func (poisoned) Version() int              { return 1 }
func (poisoned) Tables() []string          { return []string{"poisoned"} }
func (poisoned) Create(ctx context.Context, tx *sql.Tx, t projections.Tables) error {
	_, err := tx.ExecContext(ctx, `CREATE TABLE `+t["poisoned"]+` (n INTEGER)`)
	return err
}

func (poisoned) Apply(_ context.Context, _ *sql.Tx, _ projections.Tables, events []eventstore.RecordedEvent) error {
	for _, e := range events {
		if e.Type == "poison" {
			return errors.New("poisoned")
		}
	}
	return nil
}

// Ready while the store answers and every projection runs; not ready once a projection has
// failed, or once the store is gone.
func TestReadiness(t *testing.T) {
	dir := t.TempDir()
	store, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	db, err := sqlite.OpenDB(filepath.Join(dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runner := &projections.Runner{DB: db, Feed: store, Projections: []projections.Projection{poisoned{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-runner.Started()

	ready := api.Readiness(store, runner)
	appendEvent := func(typ string) {
		t.Helper()
		if _, err := store.Append(ctx, "s-"+uuid.NewString(), eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	appendEvent("fine")
	if err := ready(ctx); err != nil {
		t.Fatalf("a healthy service: %v", err)
	}

	appendEvent("poison")
	deadline := time.Now().Add(10 * time.Second)
	for ready(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("still ready 10 s after its projection met a poisoned event")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("failed projection: %v", ready(ctx))

	store.Close()
	if err := ready(ctx); err == nil {
		t.Fatal("ready with the event store closed")
	}
}
