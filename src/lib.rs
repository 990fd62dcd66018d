//! bucketsql: a PostgreSQL-wire SQL server with Apache Spark's table bucketing, executing on
//! Apache DataFusion. The modules follow a statement's way: `server` (the wire) → `sql`
//! (what was asked) → `catalog` (what exists) → `storage` (the files).

pub mod bench;
pub mod catalog;
pub mod engine;
pub mod exec;
pub mod explain;
pub mod planner;
pub mod server;
pub mod sql;
pub mod storage;
