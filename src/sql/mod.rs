//! What was asked: our SQL dialect, per-connection sessions, running statements and the one
//! dispatch over their kinds, each command in a file of its own, writing rows into tables,
//! the PostgreSQL catalog clients query and what each connection is doing.

pub(crate) mod activity;
pub(crate) mod cast_name_collisions;
pub(crate) mod commands;
pub(crate) mod decimal_operators;
pub(crate) mod dialect;
pub(crate) mod dispatch;
pub mod engine;
pub(crate) mod functions;
pub(crate) mod generators;
pub(crate) mod grouping_functions;
pub(crate) mod grouping_limits;
pub mod history;
pub(crate) mod in_list_duplicates;
pub(crate) mod interrupt;
pub(crate) mod names;
pub(crate) mod outer_join_using;
pub(crate) mod output;
pub(crate) mod pg_catalog;
pub(crate) mod rewrite;
pub(crate) mod session;
pub(crate) mod spark;
pub(crate) mod statement;
pub(crate) mod statement_end;
pub(crate) mod table_ddl;
pub mod statement_stats;
pub(crate) mod tuple_in_subquery;
pub(crate) mod write;
