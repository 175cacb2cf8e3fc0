-- Streams: one row per stream ever written. A deleted stream keeps its row (deleted = true) so
-- that a recreated stream continues its revisions, as KurrentDB does. Unlike the embedded
-- store, every append writes its stream's row: last_revision is always the stream's last.
CREATE TABLE streams (
	name            text    PRIMARY KEY,
	first_revision  bigint  NOT NULL, -- first revision of the current life (after a delete)
	last_revision   bigint  NOT NULL, -- last revision ever written, kept across a delete
	deleted         boolean NOT NULL DEFAULT false
);

-- Events: position is the global log order, assigned by the writer that holds the write lock
-- (see the package documentation), so positions grow in commit order.
CREATE TABLE events (
	position  bigint      PRIMARY KEY,
	id        uuid        NOT NULL CONSTRAINT events_id_key UNIQUE, -- named for the errors (see fault)
	stream    text        NOT NULL REFERENCES streams (name),
	revision  bigint      NOT NULL,
	type      text        NOT NULL,
	data      bytea       NOT NULL,
	metadata  bytea,
	recorded  timestamptz NOT NULL,
	UNIQUE (stream, revision)
);

-- The log's head: the position of the last event ever assigned, written by the same
-- transaction as the events. Positions are never reused, even after a delete.
CREATE TABLE log_head (
	only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
	position  bigint  NOT NULL
);
INSERT INTO log_head (position) VALUES (0);
