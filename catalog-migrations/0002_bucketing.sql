-- Bucketing and partitioning: each table's bucket spec, the roles of its columns, its
-- partitions, and for every data file the partition directory and bucket it belongs to.

-- NULL when the table is not bucketed.
ALTER TABLE tables ADD COLUMN num_buckets INTEGER;
-- The bucket function files were written with, so that a future change of it is detected
-- instead of silently mixing layouts.
ALTER TABLE tables ADD COLUMN bucket_hash TEXT;
ALTER TABLE tables ADD COLUMN bucket_hash_version INTEGER;

-- Position of the column in PARTITIONED BY / CLUSTERED BY / SORTED BY, NULL when absent.
ALTER TABLE columns ADD COLUMN partition_index INTEGER;
ALTER TABLE columns ADD COLUMN bucket_index INTEGER;
ALTER TABLE columns ADD COLUMN sort_index INTEGER;

-- Hive-style partition directory relative to the table location (`d=2026-01-01/c=US`),
-- '' for an unpartitioned table.
ALTER TABLE data_files ADD COLUMN partition_path TEXT NOT NULL DEFAULT '';
-- The Spark bucket id the file holds (also encoded in its name), NULL when not bucketed.
ALTER TABLE data_files ADD COLUMN bucket_id INTEGER;

CREATE TABLE partitions (
    table_id  INTEGER NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    path      TEXT NOT NULL,
    PRIMARY KEY (table_id, path)
);
