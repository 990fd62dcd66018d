-- Schemas, tables, columns, properties and the committed file list of every table.
-- The committed file list is the truth about what a table holds: a data file that is
-- not listed in data_files is not part of the table, whatever lies in its directory.

CREATE TABLE schemas (
    name        TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL
);

INSERT INTO schemas (name, created_at) VALUES ('default', CAST(strftime('%s', 'now') AS INTEGER));

CREATE TABLE tables (
    id           INTEGER PRIMARY KEY,
    schema_name  TEXT NOT NULL REFERENCES schemas (name),
    name         TEXT NOT NULL,
    provider     TEXT NOT NULL,
    location     TEXT NOT NULL,
    is_external  INTEGER NOT NULL,
    comment      TEXT,
    created_at   INTEGER NOT NULL,
    -- Incremented by every committed write.
    version      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (schema_name, name)
);

CREATE TABLE columns (
    table_id   INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    -- Spark's simple type string: bigint, string, decimal(10,2), timestamp, ...
    data_type  TEXT NOT NULL,
    nullable   INTEGER NOT NULL,
    comment    TEXT,
    PRIMARY KEY (table_id, position)
);

CREATE TABLE table_properties (
    table_id  INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (table_id, key)
);

CREATE TABLE data_files (
    table_id    INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    -- Relative to the table location.
    path        TEXT NOT NULL,
    row_count   INTEGER NOT NULL,
    byte_size   INTEGER NOT NULL,
    PRIMARY KEY (table_id, path)
);

-- Files moved into place by a write that has not committed yet. A crash between the move
-- and the commit leaves rows here; startup deletes their files.
CREATE TABLE pending_files (
    path  TEXT PRIMARY KEY
);

-- Files replaced by an overwrite or a drop, deleted once no running statement may still read them.
CREATE TABLE retired_files (
    path  TEXT PRIMARY KEY
);
