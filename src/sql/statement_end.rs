//! What a statement leaves behind when it ends, however it ends: its outcome in the query
//! history, the server's metrics, its figures in `pg_stat_statements`, and, when it took at
//! least `log_min_duration_statement`, a line in the slow-statement log with its plan and what
//! each operator measured, as EXPLAIN ANALYZE prints them.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream};
use futures::Stream;

use super::history::{QueryRecord, QueryState};
use super::session::Session;
use crate::error::SqlError;
use crate::explain::analyze::{Totals, metrics_section, totals};
use crate::explain::{self, ExplainContext, ExplainMode};
use crate::metrics::METRICS;

/// A running statement, to be ended once.
pub(super) struct StatementEnd {
    session: Arc<Session>,
    sql: String,
    kind: String,
    record: Option<Arc<QueryRecord>>,
    started: Instant,
    ended: bool,
}

impl StatementEnd {
    /// A statement of text `sql` starts; `record` is its entry in the query history.
    pub(super) fn begin(session: &Arc<Session>, sql: &str, record: Option<Arc<QueryRecord>>) -> Self {
        StatementEnd {
            session: Arc::clone(session),
            sql: sql.to_string(),
            kind: kind(sql),
            record,
            started: Instant::now(),
            ended: false,
        }
    }

    /// A statement that could not be parsed: counted as `invalid`, whatever its text.
    pub(super) fn unparsed(session: &Arc<Session>, sql: &str, record: Option<Arc<QueryRecord>>) -> Self {
        let mut end = Self::begin(session, sql, record);
        end.kind = INVALID.to_string();
        end
    }

    /// Ends the statement with `state`, `rows` returned or written, and its error; only the
    /// first end counts.
    pub(super) fn end(&mut self, state: QueryState, rows: Option<u64>, error: Option<&SqlError>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let duration = self.started.elapsed();
        if let Some(record) = &self.record {
            record.end(state, rows, error);
        }
        if state == QueryState::Failed {
            // As in PostgreSQL, a statement that fails inside a transaction block fails it; one
            // whose client stopped reading its rows (a portal closed early) does not.
            self.session.tables.fail();
        }
        let plan = self.session.running.take_plan();
        let figures = plan.as_ref().map(|(plan, _)| totals(plan)).unwrap_or_default();
        count(&self.kind, state, error, duration.as_secs_f64(), &figures);
        let login = self.session.backend.login();
        let user = login.map_or("", |l| l.user.as_str());
        if state == QueryState::Finished {
            self.session.engine.statement_stats.record(user, &self.sql, duration, rows.unwrap_or(0), &figures);
        }
        // As PostgreSQL's, the log holds statements that complete.
        if state == QueryState::Finished && self.session.log_min_duration().is_some_and(|least| duration >= least) {
            let plan = plan.map(|(plan, conf)| {
                let mut text = explain::render(&plan, ExplainMode::Formatted, &ExplainContext { conf, logical: None });
                text.push_str(&metrics_section(&plan, rows.unwrap_or(0) as usize, duration));
                text
            });
            tracing::info!(
                target: "bucketsql::slow_statement",
                duration_ms = duration.as_secs_f64() * 1000.0,
                rows = rows.unwrap_or(0),
                user,
                pid = login.map_or(0, |l| l.pid),
                statement = %self.sql,
                plan = plan.as_deref().unwrap_or(""),
                "slow statement"
            );
        }
    }

    /// `rows`, ending the statement when they end, fail, or are dropped unread.
    pub(super) fn rows(self, rows: SendableRecordBatchStream) -> SendableRecordBatchStream {
        Box::pin(EndingRows { schema: rows.schema(), rows, end: self, count: 0 })
    }
}

impl Drop for StatementEnd {
    fn drop(&mut self) {
        self.end(QueryState::Abandoned, None, None);
    }
}

/// The server's metrics of one statement's end.
fn count(kind: &str, state: QueryState, error: Option<&SqlError>, seconds: f64, figures: &Totals) {
    let class = error.map_or("00", |e| e.code.get(..2).unwrap_or(e.code));
    let outcome = match state {
        QueryState::Finished => "ok",
        QueryState::Failed => "error",
        QueryState::Running | QueryState::Abandoned => "abandoned",
    };
    METRICS.statements.with_label_values(&[kind, outcome, class]).inc();
    METRICS.statement_seconds.observe(seconds);
    if error.is_some_and(|e| e.code == "40001") {
        METRICS.conflicts.inc();
    }
    METRICS.rows_read.inc_by(figures.rows_read);
    METRICS.bytes_read.inc_by(figures.bytes_read);
    METRICS.bytes_shuffled.inc_by(figures.bytes_shuffled);
    METRICS.bytes_spilled.inc_by(figures.bytes_spilled);
    METRICS.exchanges_planned.inc_by(figures.exchanges);
    METRICS.exchanges_avoided.inc_by(figures.exchanges_avoided);
    METRICS.bucket_files_pruned.inc_by(figures.buckets_pruned);
    METRICS.partitions_coalesced.inc_by(figures.partitions_coalesced);
    METRICS.runtime_broadcasts.inc_by(figures.runtime_broadcasts);
    METRICS.skew_splits.inc_by(figures.skew_splits);
}

const INVALID: &str = "INVALID";

/// A parsed statement's kind for the metrics: its first keyword (`SELECT`, `INSERT`, `CREATE`
/// …), past comments and parentheses; a grammar's few, whatever the text.
fn kind(sql: &str) -> String {
    let mut rest = sql;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(comment) = rest.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = rest.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            break;
        }
    }
    let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    if word.is_empty() { INVALID.to_string() } else { word.to_ascii_uppercase() }
}

/// A statement's rows, counted as they pass; the statement ends with them.
struct EndingRows {
    schema: SchemaRef,
    rows: SendableRecordBatchStream,
    end: StatementEnd,
    count: u64,
}

impl Stream for EndingRows {
    type Item = datafusion::error::Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.rows.as_mut().poll_next(cx);
        let count = self.count;
        match &polled {
            Poll::Ready(Some(Ok(batch))) => self.count += batch.num_rows() as u64,
            Poll::Ready(Some(Err(e))) => self.end.end(QueryState::Failed, Some(count), Some(&SqlError::from(e))),
            Poll::Ready(None) => self.end.end(QueryState::Finished, Some(count), None),
            Poll::Pending => {}
        }
        polled
    }
}

impl RecordBatchStream for EndingRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Drop for EndingRows {
    fn drop(&mut self) {
        let count = self.count;
        self.end.end(QueryState::Abandoned, Some(count), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_of_the_kind_of_its_first_keyword() {
        assert_eq!(kind("  (select 1)"), "SELECT");
        assert_eq!(kind("-- note\n/* more */ INSERT INTO t VALUES (1)"), "INSERT");
        assert_eq!(kind("create table t (k int)"), "CREATE");
        assert_eq!(kind("42"), "INVALID");
    }
}
