//! The rows of `pg_stat_activity`, `pg_stat_progress_copy` and `pg_stat_statements`: the
//! server's connections, their running COPYs, and the statements run since the figures were
//! reset.

use datafusion::error::Result;

use super::oids::*;
use super::scan::Scan;
use super::values::{Row, Value, row};
use crate::sql::activity::BackendState;

/// One row per connection. Every connection acts as the superuser, whatever name it logged
/// in with; an idle one waits for its client, as PostgreSQL's `ClientRead`, and one whose
/// statement runs on Spark waits for Spark Connect (`Extension`, `SparkConnect`).
pub(super) fn pg_stat_activity(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .backends()
        .iter()
        .filter_map(|backend| {
            let login = backend.login()?;
            let statement = backend.statement();
            let (wait_type, wait) = match statement.state {
                BackendState::Active if statement.on_spark => (Some("Extension"), Some("SparkConnect")),
                BackendState::Active => (None, None),
                _ => (Some("Client"), Some("ClientRead")),
            };
            Some(row![
                DATABASE_OID,
                DATABASE_NAME,
                login.pid,
                Value::Null,
                SUPERUSER_OID,
                login.user.as_str(),
                backend.application_name(),
                backend.client.map(|client| client.ip().to_string()),
                Value::Null,
                backend.client.map(|client| i32::from(client.port())),
                backend.started,
                statement.transaction_start(),
                statement.query_start,
                statement.state_change,
                wait_type,
                wait,
                statement.state.name(),
                Value::Null,
                Value::Null,
                Value::Null,
                statement.query,
                "client backend",
            ])
        })
        .collect())
}

/// One row per running COPY. Its data always comes and goes over the connection (`PIPE`),
/// whose size is not known ahead (`bytes_total` 0), and COPY has no `WHERE` to exclude rows.
pub(super) fn pg_stat_progress_copy(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .backends()
        .iter()
        .filter_map(|backend| {
            let (login, copy) = (backend.login()?, backend.copy_progress()?);
            Some(row![
                login.pid,
                DATABASE_OID,
                DATABASE_NAME,
                copy.relid,
                copy.command.name(),
                "PIPE",
                copy.bytes() as i64,
                0,
                copy.tuples() as i64,
                0,
            ])
        })
        .collect())
}

/// One row per user and normalised statement text, most called first; beside PostgreSQL's
/// columns, who ran it and what bucketing is about.
pub(super) fn pg_stat_statements(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .statement_stats()
        .map(|stats| stats.entries())
        .unwrap_or_default()
        .into_iter()
        .map(|entry| {
            row![
                SUPERUSER_OID,
                DATABASE_OID,
                true,
                entry.queryid,
                entry.query.as_str(),
                entry.calls as i64,
                entry.total_ms,
                entry.min_ms,
                entry.max_ms,
                entry.mean_ms(),
                entry.stddev_ms(),
                entry.rows as i64,
                entry.user.as_str(),
                entry.exchanges as i64,
                entry.bytes_shuffled as i64,
                entry.buckets_pruned as i64,
            ]
        })
        .collect())
}
