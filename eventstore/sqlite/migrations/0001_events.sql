-- Streams: one row per stream ever written. A deleted stream keeps its row (deleted = 1) so that
-- a recreated stream continues its revisions, as KurrentDB does. The row is written when a
-- stream is created, deleted or recreated, not on every append: a live stream's last revision
-- is the largest revision of its events.
CREATE TABLE streams (
	id              INTEGER PRIMARY KEY,
	name            TEXT    NOT NULL UNIQUE,
	first_revision  INTEGER NOT NULL, -- first revision of the current life (after a delete)
	last_revision   INTEGER NOT NULL, -- last revision when the row was written
	deleted         INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Events: position is the global log order. AUTOINCREMENT so that a position is never reused
-- after a delete: positions only grow.
CREATE TABLE events (
	position   INTEGER PRIMARY KEY AUTOINCREMENT,
	id         BLOB    NOT NULL UNIQUE,
	stream_id  INTEGER NOT NULL REFERENCES streams (id),
	revision   INTEGER NOT NULL,
	type       TEXT    NOT NULL,
	data       BLOB    NOT NULL,
	metadata   BLOB,
	recorded   INTEGER NOT NULL, -- Unix nanoseconds, UTC
	UNIQUE (stream_id, revision)
) STRICT;
