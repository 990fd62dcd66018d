//! The statements run lately, server-wide, with the plans they ran and what each operator
//! measured: what the web UI lists and draws, as Spark's SQL tab keeps its executions.
//!
//! The history is bounded (the oldest statement leaves when a new one comes past the
//! capacity) and a statement keeps its physical plan only while it runs: a plan that has run
//! can hold its stages' shuffled rows, so at its end it is reduced to its graph, and the plan
//! is let go.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use datafusion::physical_plan::ExecutionPlan;
use tokio_util::sync::CancellationToken;

use super::activity::{Backend, lock};
use crate::config::SparkConf;
use crate::error::SqlError;
use crate::explain::ExplainContext;
use crate::explain::graph::PlanGraph;

/// Statements the history keeps when the web UI is on, as Spark's UI keeps its last 1,000
/// executions (`spark.sql.ui.retainedExecutions`).
pub const DEFAULT_QUERY_HISTORY: usize = 1000;

/// The longest statement text kept, in bytes.
pub(super) const SQL_TEXT_BYTES: usize = 64 << 10;

/// The last statements of every connection, newest last.
pub struct QueryHistory {
    capacity: usize,
    next_id: AtomicU64,
    records: Mutex<VecDeque<Arc<QueryRecord>>>,
}

impl QueryHistory {
    /// Keeps the last `capacity` statements; none when 0.
    pub fn new(capacity: usize) -> Self {
        QueryHistory { capacity, next_id: AtomicU64::new(1), records: Mutex::default() }
    }

    /// A statement of `backend` starts, inside the transaction block `transaction` if it is
    /// in one; `None` when the history keeps nothing.
    pub fn begin(&self, backend: &Backend, sql: &str, transaction: Option<u64>) -> Option<Arc<QueryRecord>> {
        if self.capacity == 0 {
            return None;
        }
        let login = backend.login();
        let record = Arc::new(QueryRecord {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            pid: login.map_or(0, |l| l.pid),
            user: login.map_or_else(String::new, |l| l.user.clone()),
            transaction,
            sql: super::activity::truncated(sql, SQL_TEXT_BYTES).to_string(),
            started: SystemTime::now(),
            clock: Instant::now(),
            outcome: Mutex::new(None),
            plan: Mutex::new(PlanState::None),
            spark: Mutex::new(None),
            // The web UI's cancel is the backend's, as a CancelRequest's is.
            cancel: backend.statement_cancellation(),
        });
        let mut records = lock(&self.records);
        if records.len() == self.capacity {
            records.pop_front();
        }
        records.push_back(Arc::clone(&record));
        Some(record)
    }

    /// Every statement kept, oldest first.
    pub fn records(&self) -> Vec<Arc<QueryRecord>> {
        lock(&self.records).iter().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<QueryRecord>> {
        let records = lock(&self.records);
        // Ids grow along the list.
        let at = records.binary_search_by_key(&id, |r| r.id).ok()?;
        Some(Arc::clone(&records[at]))
    }
}

/// A session's running statement, which the plans it runs are given to. Shared with the
/// session's DataFusion context (as a config extension) for the table writes that plan there.
#[derive(Default)]
pub struct RunningStatement(Mutex<Running>);

#[derive(Default)]
struct Running {
    record: Option<Arc<QueryRecord>>,
    plan: Option<(Arc<dyn ExecutionPlan>, SparkConf)>,
}

impl RunningStatement {
    /// A statement starts, kept in the history as `record` (where the history keeps it).
    pub fn set(&self, record: Option<Arc<QueryRecord>>) {
        *lock(&self.0) = Running { record, plan: None };
    }

    /// `plan` is what the running statement runs, under the settings `conf`.
    pub fn planned(&self, plan: &Arc<dyn ExecutionPlan>, conf: SparkConf) {
        let mut running = lock(&self.0);
        if let Some(record) = running.record.as_ref() {
            record.planned(plan, ExplainContext { conf: conf.clone(), logical: None });
        }
        running.plan = Some((Arc::clone(plan), conf));
    }

    /// The statement runs on `engine` (a Spark Connect server); its record, where the
    /// history keeps it, for Spark's plan to be added to.
    pub fn runs_on_spark(&self, engine: String) -> Option<Arc<QueryRecord>> {
        let running = lock(&self.0);
        let record = running.record.as_ref()?;
        *lock(&record.spark) = Some((engine, None));
        Some(Arc::clone(record))
    }

    /// The plan the statement ran, with its settings, let go of here.
    pub fn take_plan(&self) -> Option<(Arc<dyn ExecutionPlan>, SparkConf)> {
        lock(&self.0).plan.take()
    }
}

/// One statement.
pub struct QueryRecord {
    pub id: u64,
    /// The connection's pid, as `pg_stat_activity` and CancelRequests know it; 0 for a
    /// session no client opened.
    pub pid: i32,
    pub user: String,
    /// The transaction block the statement ran in; `None` for one that was a transaction of
    /// its own.
    pub transaction: Option<u64>,
    pub sql: String,
    pub started: SystemTime,
    clock: Instant,
    outcome: Mutex<Option<Outcome>>,
    plan: Mutex<PlanState>,
    /// Where a statement that ran on Spark ran, and Spark's plan of it (EXPLAIN FORMATTED)
    /// once fetched.
    spark: Mutex<Option<(String, Option<String>)>>,
    cancel: CancellationToken,
}

/// How a statement ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub state: QueryState,
    pub duration: Duration,
    /// Rows returned, or written by an INSERT; `None` where the statement counts none.
    pub rows: Option<u64>,
    /// SQLSTATE and message of a failure.
    pub error: Option<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryState {
    Running,
    Finished,
    Failed,
    /// Its client stopped reading its rows: a CancelRequest, or the connection closed.
    Abandoned,
}

impl QueryState {
    pub fn name(self) -> &'static str {
        match self {
            QueryState::Running => "running",
            QueryState::Finished => "finished",
            QueryState::Failed => "failed",
            QueryState::Abandoned => "abandoned",
        }
    }
}

enum PlanState {
    None,
    Running(Arc<dyn ExecutionPlan>, Box<ExplainContext>),
    /// The plan that ran here, or Spark's plan of a statement that ran on Spark.
    Ran(Arc<PlanGraph>),
}

impl QueryRecord {
    /// The plan the statement runs, set when it is planned (the last, where a statement runs
    /// several).
    fn planned(&self, plan: &Arc<dyn ExecutionPlan>, ctx: ExplainContext) {
        let mut state = lock(&self.plan);
        if !matches!(*state, PlanState::Ran(_)) {
            *state = PlanState::Running(Arc::clone(plan), Box::new(ctx));
        }
    }

    /// The statement's plan with what its operators have measured: so far while it runs.
    pub fn graph(&self) -> Option<Arc<PlanGraph>> {
        match &*lock(&self.plan) {
            PlanState::None => None,
            PlanState::Running(plan, ctx) => Some(Arc::new(PlanGraph::of(plan, ctx))),
            PlanState::Ran(graph) => Some(Arc::clone(graph)),
        }
    }

    /// The Spark Connect server the statement ran on, and Spark's plan of it once known.
    pub fn spark(&self) -> Option<(String, Option<String>)> {
        lock(&self.spark).clone()
    }

    /// Spark's plan of a statement that runs on Spark: its EXPLAIN FORMATTED `text`, and the
    /// graph drawn from it where it could be read.
    pub fn spark_planned(&self, text: String, graph: Option<PlanGraph>) {
        if let Some((_, known)) = lock(&self.spark).as_mut() {
            *known = Some(text);
        }
        if let Some(graph) = graph {
            *lock(&self.plan) = PlanState::Ran(Arc::new(graph));
        }
    }

    /// `None` while it runs.
    pub fn outcome(&self) -> Option<Outcome> {
        lock(&self.outcome).clone()
    }

    pub fn state(&self) -> QueryState {
        self.outcome().map_or(QueryState::Running, |o| o.state)
    }

    /// How long it has run, or ran.
    pub fn elapsed(&self) -> Duration {
        self.outcome().map_or_else(|| self.clock.elapsed(), |o| o.duration)
    }

    /// Ends the statement, keeping its plan's graph: the first end counts.
    pub fn end(&self, state: QueryState, rows: Option<u64>, error: Option<&SqlError>) {
        let mut outcome = lock(&self.outcome);
        if outcome.is_some() {
            return;
        }
        let mut plan = lock(&self.plan);
        if let PlanState::Running(running, ctx) = &*plan {
            *plan = PlanState::Ran(Arc::new(PlanGraph::of(running, ctx)));
        }
        *outcome = Some(Outcome {
            state,
            duration: self.clock.elapsed(),
            rows,
            error: error.map(|e| (e.code.to_string(), e.message.clone())),
        });
    }

    /// Asks the statement to stop, as a CancelRequest does: it ends with SQLSTATE 57014.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_statement_leaves_past_the_capacity() {
        let history = QueryHistory::new(2);
        let backend = Backend::new(None);
        let ids: Vec<u64> = (0..3).map(|i| history.begin(&backend, &format!("SELECT {i}"), None).unwrap().id).collect();
        let kept: Vec<u64> = history.records().iter().map(|r| r.id).collect();
        assert_eq!(kept, ids[1..]);
        assert!(history.get(ids[0]).is_none());
        assert_eq!(history.get(ids[2]).unwrap().sql, "SELECT 2");
        assert!(QueryHistory::new(0).begin(&backend, "SELECT 1", None).is_none());
    }

    #[test]
    fn the_first_end_counts() {
        let history = QueryHistory::new(10);
        let record = history.begin(&Backend::new(None), "SELECT 1", None).unwrap();
        assert_eq!(record.state(), QueryState::Running);
        record.end(QueryState::Finished, Some(1), None);
        record.end(QueryState::Failed, None, Some(&SqlError::new("57014", "late")));
        let outcome = record.outcome().unwrap();
        assert_eq!((outcome.state, outcome.rows, outcome.error), (QueryState::Finished, Some(1), None));
    }
}
