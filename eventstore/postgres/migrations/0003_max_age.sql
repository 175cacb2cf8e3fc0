-- A stream's maximum age (eventstore.StreamAppend.MaxAge) and the time past which all of its
-- events are older than it, when the stream is expired: reads leave out what is past them, and
-- the writers forget expired streams by that time's index (see expireQuery). Set while the
-- stream is live with a maximum age; a deleted stream keeps its max_age, for a stream recreated
-- meanwhile. Rows from before these columns have none, as their streams had none.
ALTER TABLE streams ADD COLUMN max_age interval;
ALTER TABLE streams ADD COLUMN expires_at timestamptz; -- the last event's recorded + max_age
CREATE INDEX streams_expires_at ON streams (expires_at) WHERE expires_at IS NOT NULL;
