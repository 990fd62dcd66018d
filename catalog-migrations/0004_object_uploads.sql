-- The multipart upload a pending object is written by, once its first part is on its way: a
-- crash leaves the upload's parts in the store, invisible to listings, until the next start
-- aborts it by this id.
ALTER TABLE pending_files ADD COLUMN upload_id TEXT;
