-- A deleted stream's row says when it was deleted, so that it is kept only for a while (see
-- Config.KeepDeleted): deleted streams do not fill the database with rows for good. Rows
-- deleted before this column count from now.
ALTER TABLE streams ADD COLUMN deleted_at timestamptz; -- set while deleted
UPDATE streams SET deleted_at = now() WHERE deleted;
CREATE INDEX streams_deleted_at ON streams (deleted_at) WHERE deleted;
