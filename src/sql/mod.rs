//! What was asked: our SQL dialect, per-connection sessions and statement dispatch.

pub mod copy;
pub mod ddl;
pub mod describe;
pub mod dialect;
pub mod dml;
pub mod error;
pub mod functions;
pub mod interrupt;
pub mod rewrite;
pub mod session;
pub mod spark_conf;
