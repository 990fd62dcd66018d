//! What exists: the SQLite metastore and the column types it records.

pub mod bucket_summary;
pub mod metastore;
pub mod migrations;
pub mod types;
