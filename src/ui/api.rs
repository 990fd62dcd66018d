//! `/api/v1/`: what the pages show, as JSON, for scripts and notebooks. The pages are
//! rendered from the same records.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::access::Viewer;
use super::state::UiState;
use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::table::TableMeta;
use crate::config::KNOWN_KEYS;
use crate::explain::graph::PlanGraph;
use crate::sql::activity::Backend;
use crate::sql::history::{QueryRecord, QueryState};
use crate::sql::statement_stats::StatementEntry;

#[derive(Debug, Serialize)]
pub(super) struct QuerySummary {
    pub id: u64,
    /// The connection's pid.
    pub connection: i32,
    pub user: String,
    /// The transaction block it ran in, if it ran in one.
    pub transaction: Option<u64>,
    pub sql: String,
    pub state: &'static str,
    /// RFC 3339, UTC.
    pub started: String,
    /// So far, while it runs.
    pub duration_ms: f64,
    pub rows: Option<u64>,
    pub sqlstate: Option<String>,
    pub error: Option<String>,
    /// The Spark Connect server the statement ran on; `None` for one that ran here.
    pub spark: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct QueryDetail {
    #[serde(flatten)]
    pub summary: QuerySummary,
    /// The plan with its operators' figures: so far while it runs.
    pub plan: Option<PlanGraph>,
    /// The lines of `== Advice (Bucketing) ==`.
    pub advice: Vec<String>,
    /// Spark's plan (EXPLAIN FORMATTED) of a statement that ran on Spark, once fetched.
    pub spark_plan: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct TableSummary {
    pub schema: String,
    pub name: String,
    pub provider: String,
    pub location: String,
    pub partition_columns: Vec<String>,
    pub bucket_columns: Vec<String>,
    pub sort_columns: Vec<String>,
    pub num_buckets: Option<u32>,
    pub files: usize,
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct TableDetail {
    #[serde(flatten)]
    pub summary: TableSummary,
    pub columns: Vec<Column>,
    pub partitions: usize,
    /// One entry per bucket, over all partitions; empty for a table that is not bucketed.
    pub buckets: Vec<Bucket>,
    /// The largest bucket's rows over the mean bucket's.
    pub skew: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
}

#[derive(Debug, Serialize)]
pub(super) struct Bucket {
    pub bucket: u32,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct Connection {
    pub pid: i32,
    pub user: String,
    pub client: Option<String>,
    pub application_name: String,
    pub state: &'static str,
    pub backend_start: String,
    pub query: String,
}

#[derive(Debug, Serialize)]
pub(super) struct Setting {
    pub key: String,
    pub value: String,
    /// Spark's default, for the settings the planner reads.
    pub default: Option<&'static str>,
    /// Set by the session, rather than the default.
    pub overridden: bool,
}

fn rfc3339(at: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl QuerySummary {
    pub fn of(record: &QueryRecord) -> Self {
        let outcome = record.outcome();
        let (sqlstate, error) = outcome.as_ref().and_then(|o| o.error.clone()).unzip();
        QuerySummary {
            id: record.id,
            connection: record.pid,
            user: record.user.clone(),
            transaction: record.transaction,
            sql: record.sql.clone(),
            state: outcome.as_ref().map_or(QueryState::Running, |o| o.state).name(),
            started: rfc3339(record.started),
            duration_ms: record.elapsed().as_secs_f64() * 1000.0,
            rows: outcome.and_then(|o| o.rows),
            sqlstate,
            error,
            spark: record.spark().map(|(engine, _)| engine),
        }
    }
}

impl QueryDetail {
    pub fn of(record: &QueryRecord) -> Self {
        let plan = record.graph().map(|g| g.as_ref().clone());
        let advice = plan.as_ref().map(|p| advice(&p.formatted)).unwrap_or_default();
        let spark_plan = record.spark().and_then(|(_, plan)| plan);
        QueryDetail { summary: QuerySummary::of(record), plan, advice, spark_plan }
    }
}

/// The advice lines of a FORMATTED plan.
fn advice(formatted: &str) -> Vec<String> {
    let Some((_, section)) = formatted.split_once("== Advice (Bucketing) ==\n") else { return Vec::new() };
    section.lines().take_while(|l| !l.starts_with("== ")).filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

impl TableSummary {
    fn of(meta: &TableMeta) -> Self {
        let spec = meta.bucket_spec.as_ref();
        TableSummary {
            schema: meta.schema.clone(),
            name: meta.name.clone(),
            provider: meta.provider.clone(),
            location: meta.location.to_string(),
            partition_columns: meta.partition_columns.clone(),
            bucket_columns: spec.map(|s| s.bucket_columns.clone()).unwrap_or_default(),
            sort_columns: spec.map(|s| s.sort_columns.clone()).unwrap_or_default(),
            num_buckets: spec.map(|s| s.num_buckets),
            files: meta.files.len(),
            rows: meta.files.iter().map(|f| f.row_count).sum(),
            bytes: meta.files.iter().map(|f| f.byte_size).sum(),
        }
    }
}

impl TableDetail {
    fn of(meta: &TableMeta) -> Self {
        let summary = meta.bucket_spec.as_ref().map(|spec| BucketSummary::of(spec.num_buckets, &meta.files));
        let buckets = summary
            .as_ref()
            .map(|s| {
                (0..s.files.len())
                    .map(|b| Bucket { bucket: b as u32, files: s.files[b], rows: s.rows[b], bytes: s.bytes[b] })
                    .collect()
            })
            .unwrap_or_default();
        TableDetail {
            summary: TableSummary::of(meta),
            columns: meta
                .columns
                .iter()
                .map(|c| Column { name: c.name.clone(), ty: c.ty.as_str().to_string() })
                .collect(),
            partitions: meta.partitions.len(),
            buckets,
            skew: summary.and_then(|s| s.skew()),
        }
    }
}

impl Connection {
    fn of(backend: &Backend) -> Option<Self> {
        let login = backend.login()?;
        let statement = backend.statement();
        Some(Connection {
            pid: login.pid,
            user: login.user.clone(),
            client: backend.client.map(|c| c.to_string()),
            application_name: backend.application_name(),
            state: statement.state.name(),
            backend_start: rfc3339(backend.started),
            query: statement.query,
        })
    }
}

/// The statements the viewer may see, newest first.
pub(super) fn visible_queries(state: &UiState, viewer: &Viewer) -> Vec<Arc<QueryRecord>> {
    let mut records: Vec<_> = state.engine.history.records().into_iter().filter(|r| viewer.may_see_query(r)).collect();
    records.reverse();
    records
}

pub(super) fn visible_query(state: &UiState, viewer: &Viewer, id: u64) -> Option<Arc<QueryRecord>> {
    state.engine.history.get(id).filter(|r| viewer.may_see_query(r))
}

pub(super) fn visible_connections(state: &UiState, viewer: &Viewer) -> Vec<Connection> {
    state
        .engine
        .backends
        .logged_in()
        .iter()
        .filter_map(|b| Connection::of(b))
        .filter(|c| viewer.may_see(&c.user))
        .collect()
}

/// The connection `pid` with its settings in effect: every setting the planner reads, and
/// whatever else the session set.
pub(super) fn connection_settings(state: &UiState, viewer: &Viewer, pid: i32) -> Option<(Connection, Vec<Setting>)> {
    let backend = state
        .engine
        .backends
        .logged_in()
        .into_iter()
        .find(|b| b.login().is_some_and(|l| l.pid == pid && viewer.may_see(&l.user)))?;
    let set = backend.settings();
    let mut settings: Vec<Setting> = KNOWN_KEYS
        .iter()
        .map(|(key, default)| {
            let value = set.get(&key.to_lowercase()).cloned();
            Setting {
                key: key.to_string(),
                overridden: value.is_some(),
                value: value.unwrap_or_else(|| default.to_string()),
                default: Some(default),
            }
        })
        .collect();
    for (key, value) in &set {
        if !KNOWN_KEYS.iter().any(|(known, _)| known.eq_ignore_ascii_case(key)) {
            settings.push(Setting { key: key.clone(), value: value.clone(), default: None, overridden: true });
        }
    }
    Some((Connection::of(&backend)?, settings))
}

pub(super) fn tables_of(state: &UiState) -> Result<Vec<TableMeta>, String> {
    let metastore = &state.engine.metastore;
    let mut tables = Vec::new();
    for schema in metastore.schema_names().map_err(|e| e.message)? {
        for name in metastore.table_names(&schema).map_err(|e| e.message)? {
            tables.extend(metastore.table(&schema, &name).map_err(|e| e.message)?);
        }
    }
    Ok(tables)
}

pub(super) fn table_of(state: &UiState, schema: &str, name: &str) -> Result<Option<TableDetail>, String> {
    let meta = state.engine.metastore.table(schema, name).map_err(|e| e.message)?;
    Ok(meta.as_ref().map(TableDetail::of))
}

pub(super) fn table_summaries(tables: &[TableMeta]) -> Vec<TableSummary> {
    tables.iter().map(TableSummary::of).collect()
}

fn missing(what: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(serde_json::json!({ "error": format!("no such {what}") }))).into_response()
}

fn failed(message: String) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, Json(serde_json::json!({ "error": message }))).into_response()
}

pub(super) async fn queries(State(state): State<Arc<UiState>>, Extension(viewer): Extension<Viewer>) -> Response {
    let summaries: Vec<QuerySummary> = visible_queries(&state, &viewer).iter().map(|r| QuerySummary::of(r)).collect();
    Json(summaries).into_response()
}

pub(super) async fn query(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<u64>,
) -> Response {
    match visible_query(&state, &viewer, id) {
        Some(record) => Json(QueryDetail::of(&record)).into_response(),
        None => missing("query"),
    }
}

pub(super) async fn tables(State(state): State<Arc<UiState>>) -> Response {
    match tables_of(&state) {
        Ok(tables) => Json(table_summaries(&tables)).into_response(),
        Err(e) => failed(e),
    }
}

pub(super) async fn table(State(state): State<Arc<UiState>>, Path((schema, name)): Path<(String, String)>) -> Response {
    match table_of(&state, &schema, &name) {
        Ok(Some(detail)) => Json(detail).into_response(),
        Ok(None) => missing("table"),
        Err(e) => failed(e),
    }
}

pub(super) async fn connections(State(state): State<Arc<UiState>>, Extension(viewer): Extension<Viewer>) -> Response {
    Json(visible_connections(&state, &viewer)).into_response()
}

pub(super) async fn settings(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(pid): Path<i32>,
) -> Response {
    match connection_settings(&state, &viewer, pid) {
        Some((_, settings)) => Json(settings).into_response(),
        None => missing("connection"),
    }
}

pub(super) async fn not_found() -> Response {
    missing("resource")
}

/// One line of `pg_stat_statements`, as the statements page shows it.
#[derive(Debug, Serialize)]
pub(super) struct StatementFigures {
    pub user: String,
    pub queryid: i64,
    pub query: String,
    pub calls: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub rows: u64,
    pub exchanges: u64,
    pub bytes_shuffled: u64,
    pub buckets_pruned: u64,
}

impl StatementFigures {
    fn of(entry: &StatementEntry) -> Self {
        StatementFigures {
            user: entry.user.clone(),
            queryid: entry.queryid,
            query: entry.query.clone(),
            calls: entry.calls,
            total_ms: entry.total_ms,
            mean_ms: entry.mean_ms(),
            min_ms: entry.min_ms,
            max_ms: entry.max_ms,
            rows: entry.rows,
            exchanges: entry.exchanges,
            bytes_shuffled: entry.bytes_shuffled,
            buckets_pruned: entry.buckets_pruned,
        }
    }
}

/// `pg_stat_statements`' lines the viewer may see (their own user's), most called first.
pub(super) fn visible_statements(state: &UiState, viewer: &Viewer) -> Vec<StatementFigures> {
    state
        .engine
        .statement_stats
        .entries()
        .iter()
        .filter(|e| viewer.may_see(&e.user))
        .map(StatementFigures::of)
        .collect()
}

pub(super) async fn statements(State(state): State<Arc<UiState>>, Extension(viewer): Extension<Viewer>) -> Response {
    Json(visible_statements(&state, &viewer)).into_response()
}
