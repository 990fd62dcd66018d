//! What exists: the SQLite metastore, column types, and the DataFusion view of both.

pub mod metastore;
pub mod migrations;
pub mod provider;
pub mod types;
