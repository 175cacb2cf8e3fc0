package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
)

// readModelsFile is the read models' database in the data directory, beside the events.
const readModelsFile = "readmodels.db"

// startProjections opens the read models and runs their projections from feed. stop waits for
// them to halt at a checkpoint and closes the database.
func startProjections(ctx context.Context, dataDir string, feed eventstore.Feed, log *slog.Logger) (*projections.Runner, func(), error) {
	db, err := sqlite.OpenDB(filepath.Join(dataDir, readModelsFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read models: %w", err)
	}
	r := &projections.Runner{DB: db, Feed: feed, Log: log,
		Projections: []projections.Projection{projections.Orders{}, projections.Lookups{}}}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	select {
	case <-r.Started():
	case err := <-done:
		cancel()
		db.Close()
		return nil, nil, fmt.Errorf("read models: %w", err)
	}
	return r, func() {
		cancel()
		<-done
		db.Close()
	}, nil
}
