// Package sqlite is the embedded event store: one SQLite database file in a data directory, no
// server to install. It is the only package that imports a SQLite driver.
//
// # Durability
//
// The database runs in WAL mode (journal_mode=WAL) with synchronous=FULL: every commit appends
// to the write-ahead log and fsyncs it before COMMIT returns, so when Append returns nil the
// events survive a crash or a power cut. (synchronous=NORMAL, the usual WAL setting, would skip
// that sync and may lose the last commits on power loss.) WAL also lets readers and
// subscriptions run while the single writer commits.
//
// # Group commit
//
// All writes go through one goroutine that owns the only write connection. Appends that arrive
// while it is committing wait in line and are written together in the next transaction, which
// costs one fsync for all of them; the writer takes what waits when it is free and yields the
// processor a few times for more, unless appenders race on one stream. Each append keeps its own expected-revision check and its own result: an append that
// fails is left out of the transaction and never fails or reorders the others. Config.OnBatch
// reports each batch size, for metrics.
//
// A success is answered once its transaction is durable. A refusal (wrong expected revision) of a
// stream that the transaction leaves as it was rests on committed events alone, and is answered
// before the transaction's sync. A refusal of a stream the transaction writes waits for its
// commit: its actual revision is the transaction's, which a failed sync would lose (the refusal
// then becomes ErrUnavailable), and the loser, which reads the stream again, finds that revision
// only once it is committed. An append at the exact revision that the transaction being
// committed appends from (a racer that read the stream before that commit) does not join the
// next batch to lose there: it waits for that commit and is refused when it ends (see
// Store.awaitRival). Racers on one stream so learn the new revision from the commit that made
// it, not one transaction later.
//
// The writer caches stream rows (it is the only writer, so its cache is the truth), and an
// append costs one INSERT per event. An append with expected NoStream to a stream the writer
// has not cached inserts the stream's row (ON CONFLICT DO NOTHING) without reading it first; a
// row already there (a live or deleted stream) is then read, as for any other append, and a
// multi-stream append that is refused deletes the rows it so inserted before. The writer and
// the readers call the driver through database/sql/driver rather than database/sql, whose
// per-statement and per-column wrapping cost more than SQLite itself (see docs/benchmarks.md).
//
// # Maximum age
//
// A stream's row holds its maximum age (eventstore.StreamAppend.MaxAge) and, while it is live
// with one, when its last event is past it (expires_at, indexed): a stream read leaves out the
// events past the age, and answers not found once the stream is past that time. An append with
// a maximum age gives it to the row it inserts or writes anyway; one to a live stream that has
// an age moves the expiry with one UPDATE of the row; others write the row no more than before.
// The writer makes an expired stream a deleted one as of its expiry (its events removed, its
// row kept for Config.KeepDeleted): at once when a request names it, and otherwise at most once
// a second, in the transaction it commits then, up to 64 for each of the transaction's
// requests, and again in the next one while it leaves some.
//
// # Checkpoints
//
// No commit copies the WAL into the database file: a checkpointer does, on a connection of its
// own, beside the writer, once 20,000 frames (pages) are not yet copied or 5 s after its last
// copy (Config.CheckpointFrames), so that pages written again between copies are copied once.
// Then the writer, between two transactions, copies the few pages committed meanwhile (never
// more than 2,000), and the WAL starts over at its next transaction, unless a reader that began
// before the copy still reads from it; then the writer copies again after each commit, up to
// 8, until it has. SQLite's own checkpoint would run inside the commit that crosses its
// threshold and hold every append waiting for the next one. The WAL file is cut back to 128 MiB
// (or more, for a larger threshold) when it starts over. The read models' database (OpenDB)
// checkpoints in its commits, every 10,000 pages instead of SQLite's 1,000.
//
// A copy's pages reach the disk before the syncs that need them. The checkpointer syncs the
// database file itself after its passes, so the writer's part does not have to. Every 50 ms
// (Config.Writeback, DBConfig.Writeback), the kernel is asked to start writing the store's
// database file and the read models' files, without waiting for it. A checkpoint's sync then
// finds little left to write, and does not hold the store's commits on the same disk.
//
// # Reads
//
// Readers of streams share a pool of up to 16 connections, and readers of the log one of up to
// 4, which map the file into memory; they live as long as the store, each with its read
// statements prepared once. A read takes one connection per page and no transaction
// across pages, so a slow consumer never pins the WAL. A stream's page is one statement that
// joins the stream's row (by name) to its events; only an empty first page asks whether the
// stream exists, to tell a missing or deleted stream from a range without events. A bound
// LIMIT or equality would make SQLite prepare the statement again on every query with this
// driver (see newReadConn), so the statements avoid both.
//
// A subscription that keeps up is fed from memory: after each commit the writer adds the events
// it wrote to the tail, which keeps up to the latest 8,192 events of the log and 16 MiB of
// their data, in arrays of 1,024 events that it never copies, and a subscription reads the file
// only while it is behind the tail's start. The events it yields share their bytes with other
// subscriptions: they must not be modified.
//
// Positions are the events table's AUTOINCREMENT key: there is one writer, so they are assigned
// in commit order and a reader never sees position n+1 committed before n.
package sqlite
