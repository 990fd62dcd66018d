//! What exists: the SQLite metastore, the tables it describes, the changes a transaction
//! makes of them, and the column types it records.

pub mod bucket_summary;
pub mod change;
pub mod location;
pub mod metastore;
pub mod migrations;
pub mod table;
pub mod types;
