//! Writing rows into a table: in its layout (partitions, buckets, sort), staged where no
//! reader sees them, then published in one metastore commit.

pub(crate) mod append_stream;
pub(crate) mod insert_mode;
pub(crate) mod stage;
pub(crate) mod static_partitions;
pub(crate) mod table_writer;
