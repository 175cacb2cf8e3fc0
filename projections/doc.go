// Package projections keeps read models current from the global log, and rebuilds them from
// the log while the service runs.
//
// A Projection owns a few tables in the read-model database. The Runner follows the log once,
// from the lowest checkpoint, for all its projections; each skips what it has applied and
// applies the rest in batches; each batch's changes and the new
// checkpoint commit in one transaction, so after any crash every event has been applied exactly
// once. A live projection lingers a moment after an event arrives to gather more into its batch,
// for fewer commits, but not while a reader waits on it (Runner.WaitFor). A projection whose
// handler fails stops with the error visible in its Status; it never skips the event.
//
// A Selective projection is handed only the event types it folds; a batch with none of them
// writes nothing, and its checkpoint moves in memory (WaitFor answers from it), reaching the
// file with the next batch that writes or after ten BatchSizes of events: a restart meets those
// again and skips them again. All of the runner's writes go through one connection, one
// transaction at a time, which keeps that connection's page cache warm.
//
// Tables live in generations: a projection's table "orders" is stored as "orders_g3" and read
// through a view named "orders". A rebuild creates the next generation's tables, fills them from
// position 0 while the live generation keeps serving and updating, catches up with it, and then,
// in one transaction, points the views at the new tables, takes over the checkpoint and drops
// the old tables. Readers see either the old model or the new one, never a half-built one. An
// interrupted rebuild resumes from its own checkpoint.
//
// Each projection has a Version, stored with its checkpoint (files from before versions hold
// version 1). When the runner starts on a file whose live generation was written at another
// version, as after an upgrade that changed a read model, it rebuilds that projection at once,
// in the same way, while the service serves. Until the swap the outdated projection answers
// nothing: the new Apply cannot write its old tables and the new queries cannot read them, and
// an answer from an old model could be one the upgrade exists to correct. So WaitFor does not
// return for it until the swap (the API answers its reads 503 with Retry-After, within their
// bound), its Status says rebuilding, with its lag counted from the rebuild's checkpoint, and
// its old generation is left as it was. Everything else serves as usual: the other projections,
// and commands, which read no read model. Blocking the start instead would stop the whole
// service for as long as the log takes to replay. Queries must therefore WaitFor a projection
// before they read it, with the zero position if any position will do. A rebuild in progress
// that another version started is started again.
//
// The read models live in their own SQLite file, not in the event store's: the same runner
// serves a KurrentDB store, a rebuild's bulk writes do not queue behind appends in the event
// store's group commit, and the file can be deleted and rebuilt from the log at any time.
package projections
