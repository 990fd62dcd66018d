//! What was asked: our SQL dialect, per-connection sessions and statement dispatch, the
//! PostgreSQL catalog clients query, what each connection is doing, and writing a statement's
//! rows into a table.

pub mod activity;
pub mod append_stream;
pub mod copy;
pub mod ddl;
pub mod describe;
pub mod dialect;
pub mod dml;
pub mod engine;
pub mod functions;
pub mod grouping_limits;
pub mod history;
pub mod interrupt;
pub mod output;
pub mod pg_catalog;
pub mod refresh;
pub mod rewrite;
pub mod session;
pub mod statement;
pub mod static_partitions;
pub mod table_statistics;
pub mod table_writer;
pub mod variables;
