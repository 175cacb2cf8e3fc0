// Package postgres is the event store on a PostgreSQL server: the same contract as the embedded
// store, for deployments that already run PostgreSQL or that share one store between
// processes. It is the only package that imports a PostgreSQL driver (pgx).
//
// # Schema
//
// Open brings the schema up to date with the embedded migrations (migrations/*.sql), under a
// session-level advisory lock (migrateLockKey), so that processes opening one database at the
// same time apply each migration once; the table orders_schema_version records the versions
// applied. The tables mirror the embedded store's: streams (a deleted stream keeps its row for
// Config.KeepDeleted, so that a stream recreated meanwhile continues its revisions), events (data and metadata as bytea, kept
// byte for byte) and log_head (the position of the last event assigned).
//
// # Log order
//
// Readers of the log (ReadAll, SubscribeAll) read WHERE position > after ORDER BY position and
// then move after to the last position they saw. That is only right if a position never
// becomes visible after a higher one: a subscriber that has read position n must never later
// miss an event at n or below. Positions drawn from a sequence by concurrent transactions break
// this, because transactions commit in any order: the one that drew n can commit after the one
// that drew n+1, and a reader between the two commits skips n for good.
//
// So every writing transaction, in every process, first takes one transaction-level advisory
// lock, pg_advisory_xact_lock(writeLockKey), and only then reads the log's head, assigns the
// next positions, inserts and commits. PostgreSQL makes a transaction's effects visible before
// it releases its locks, so the next writer, which runs its statements (at READ COMMITTED, each
// with a new snapshot) only once it holds the lock, sees the previous one's events and head,
// and its positions follow them; positions become visible in the order they were assigned. The
// writing transactions run at READ COMMITTED whatever the server's default: at REPEATABLE READ
// the snapshot would date from before the wait for the lock.
//
// A log read goes further and reads the head in the same statement as its page, bounding the
// page by it: every event at or below a head that a snapshot sees was committed before that
// snapshot. A page shorter than asked for so moves after to the head, past the events the
// filter left out, without reading them again.
//
// # Group commit
//
// The lock makes the writers of a database take turns, so each Store writes through one
// goroutine that makes the most of a turn: the appends, deletes and truncates that arrive
// while it commits wait in line and go into its next transaction together (up to
// Config.MaxBatch). The transaction reads the rows the batch needs (its streams, and those of
// its event ids that are stored) once it holds the lock, and checks each request against them
// in memory, in order, each seeing those before it: a request refused (wrong expected
// revision, an event id stored elsewhere) is left out and never fails the others. Then the
// transaction writes what the others decided in a few statements and commits. Every request is
// answered after the commit: a refusal may name a revision that the same transaction wrote. If
// the server rejects a value of a batch (a data exception, a constraint, a limit), each
// request is tried again in a transaction of its own, so that one request's fault stays its
// own.
//
// A write's wait is bounded by Config.StatementTimeout from its call, not from the start of
// its transaction: a transaction's statements are bounded by what is left to its earliest
// request (SET LOCAL statement_timeout), and a request whose time ran out waiting for its turn
// fails without one. Otherwise a write queued behind a transaction that waits out its timeout
// (a table that another session holds locked) would wait out that one and then its own.
//
// # Maximum age
//
// A stream's row holds its maximum age (eventstore.StreamAppend.MaxAge) and, while it is live
// with one, when its last event is past it (expires_at, indexed); stream reads leave out the
// events past the age, and a stream past that time reads as not found. The row is written with
// every append anyway, so the age costs an append nothing. A transaction makes the expired
// streams its requests name deleted ones as of their expiry (their events deleted, their rows
// kept for Config.KeepDeleted). Each store's writer also looks for the others, at most once a
// second, in the transaction it commits then: up to 64 for each of its requests, and again in
// the next one while it leaves some. Every store on a database looks, so that the streams of a
// process that stopped are forgotten too.
//
// # Subscriptions
//
// A subscription reads pages until it has caught up, then waits for a wake-up: the writer wakes
// the subscriptions of its own process after each commit, and a listener connection per Store
// (LISTEN orders_events; each writing transaction sends NOTIFY) wakes them for commits of
// other processes. They also read again every second (pollInterval), so that a notification
// lost with a connection never stalls one.
//
// # Errors
//
// Stream names, event types and filter prefixes are PostgreSQL text: one that is not valid
// UTF-8 or holds a NUL byte fails with eventstore.ErrInvalidArgument. A server that cannot be
// reached, a statement timeout or a lost connection fail with an error matching
// eventstore.ErrUnavailable. The database URL's password never appears in an error.
package postgres
