-- A deleted stream's row says when it was deleted, so that it is kept only for a while (see
-- Config.KeepDeleted): deleted streams do not fill the file with rows for good. Rows deleted
-- before this column count from now.
ALTER TABLE streams ADD COLUMN deleted_at INTEGER; -- Unix nanoseconds, UTC; set while deleted = 1
UPDATE streams SET deleted_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000000000 WHERE deleted = 1;
CREATE INDEX streams_deleted_at ON streams (deleted_at) WHERE deleted = 1;
