//! What was asked: our SQL dialect, per-connection sessions, running statements and the one
//! dispatch over their kinds, each command in a file of its own, writing rows into tables,
//! the PostgreSQL catalog clients query and what each connection is doing.

pub mod activity;
pub(crate) mod commands;
pub mod dialect;
pub(crate) mod dispatch;
pub mod engine;
pub mod functions;
pub mod grouping_limits;
pub mod history;
pub mod interrupt;
pub(crate) mod names;
pub mod output;
pub mod pg_catalog;
pub mod rewrite;
pub mod session;
pub mod statement;
pub mod write;
