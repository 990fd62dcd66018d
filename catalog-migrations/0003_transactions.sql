-- Conflict detection for transactions: the first committer wins. Every committed change of a
-- table takes the next number of one catalog-wide sequence as the table's change_seq, and
-- table_changes keeps, for each kind of change, the number of the latest one. A transaction
-- that read a table at change_seq s and commits a change that conflicts with a kind committed
-- after s fails with 40001. The sequence is catalog-wide so that a table dropped and created
-- again, which SQLite may give the same id, starts above every number the old one had.

CREATE TABLE change_sequence (
    last  INTEGER NOT NULL
);
INSERT INTO change_sequence (last) VALUES (0);

ALTER TABLE tables ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE table_changes (
    table_id  INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    -- append, compact, overwrite, definition or statistics
    kind      TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (table_id, kind)
);
