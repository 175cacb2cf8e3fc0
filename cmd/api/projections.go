package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
)

// readModelsFile is the read models' database in the data directory, beside the events.
const readModelsFile = "readmodels.db"

// readModels are the projections the service runs.
func readModels(log *slog.Logger) []projections.Projection {
	return []projections.Projection{projections.Orders{}, projections.Lookups{Log: log}, projections.Sales{}}
}

// projectionNames lists the projections' names, for help and errors.
func projectionNames() string {
	var names []string
	for _, p := range readModels(nil) {
		names = append(names, p.Name())
	}
	return strings.Join(names, ", ")
}

// startProjections opens the read models and runs their projections from feed. stop lets them
// catch up with the log, waits for them to halt at a checkpoint and closes the database.
func startProjections(ctx context.Context, dataDir string, feed eventstore.Feed, cfg sqlite.DBConfig, log *slog.Logger) (*projections.Runner, func(), error) {
	db, err := sqlite.OpenDBWith(filepath.Join(dataDir, readModelsFile), cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("read models: %w", err)
	}
	r := &projections.Runner{DB: db, Feed: feed, Log: log, Projections: readModels(log)}
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
		catchUp(r, feed, log)
		cancel()
		<-done
		db.Close()
	}, nil
}

// catchUpTimeout bounds how long a stopping server waits for its read models.
const catchUpTimeout = 5 * time.Second

// catchUp waits, within catchUpTimeout, until every projection has applied the log up to its
// head: a server stopped gracefully leaves read models that match its events (as `audit
// verify` checks), not ones a batch or a linger behind. Waiting also cuts a linger short.
func catchUp(r *projections.Runner, feed eventstore.Feed, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	head, err := feed.Head(ctx)
	if err != nil {
		log.Warn("read models not caught up at stop", "error", err)
		return
	}
	for _, p := range r.Projections {
		if err := r.WaitFor(ctx, p.Name(), head); err != nil {
			log.Warn("read models not caught up at stop", "projection", p.Name(), "error", err)
		}
	}
}
