-- Conflict detection for transactions: the first committer wins. Every committed change of a
-- table moves its change_seq on, and table_changes keeps, for each kind of change, the
-- change_seq of the latest one. A transaction that read a table at change_seq s and commits a
-- change that conflicts with a kind committed after s fails with 40001.

ALTER TABLE tables ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE table_changes (
    table_id  INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    -- append, compact, overwrite, definition or statistics
    kind      TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (table_id, kind)
);
