//! The pages: queries, one query's plan, statements (`pg_stat_statements`), tables, one
//! table's buckets, connections and one connection's settings; and `/metrics` for Prometheus.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use super::access::Viewer;
use super::api::{self, Bucket, QueryDetail, QuerySummary};
use super::html::{self, bytes, count, escape, page};
use super::plan_svg;
use super::state::UiState;
use crate::explain::graph::{Adaptive, NodeKind};
use crate::metrics::METRICS;

/// The longest statement text shown in the list; the query's page shows all of it.
const LISTED_SQL_CHARS: usize = 300;

pub(super) async fn queries(State(state): State<Arc<UiState>>, Extension(viewer): Extension<Viewer>) -> Html<String> {
    let summaries: Vec<QuerySummary> =
        api::visible_queries(&state, &viewer).iter().map(|r| QuerySummary::of(r)).collect();
    let running = summaries.iter().any(|s| s.state == "running");
    let rows = summaries.iter().map(|s| {
        let sql: String = s.sql.chars().take(LISTED_SQL_CHARS).collect();
        let more = if s.sql.chars().count() > LISTED_SQL_CHARS { "…" } else { "" };
        format!(
            "<td><a href=\"/queries/{id}\">{id}</a></td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"state-{state}\">{state}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td>{}</td><td class=\"sql\"><a href=\"/queries/{id}\">{}{more}</a></td>",
            s.connection,
            escape(&s.user),
            s.transaction.map_or_else(String::new, |t| t.to_string()),
            escape(&s.started),
            html::duration(std::time::Duration::from_secs_f64(s.duration_ms / 1000.0)),
            s.rows.map_or_else(String::new, count),
            escape(s.sqlstate.as_deref().unwrap_or("")),
            escape(&sql),
            id = s.id,
            state = s.state,
        )
    });
    let body = if summaries.is_empty() {
        "<p>No statements yet. Run one over the wire (psql) and it shows here.</p>".to_string()
    } else {
        html::table(
            &[
                "Id",
                "Connection",
                "User",
                "Transaction",
                "State",
                "Started (UTC)",
                "Duration",
                "Rows",
                "SQLSTATE",
                "SQL",
            ],
            rows,
        )
    };
    page("Queries", &body, running)
}

pub(super) async fn query(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<u64>,
) -> Response {
    let Some(record) = api::visible_query(&state, &viewer, id) else { return html::not_found() };
    let detail = QueryDetail::of(&record);
    let s = &detail.summary;
    let running = s.state == "running";
    let mut body = format!(
        "<table class=\"list\" id=\"summary\"><tr><th>State</th><td class=\"state-{state}\" id=\"state\">{state}</td></tr>\
         <tr><th>Connection</th><td><a href=\"/connections/{pid}/settings\">{pid}</a></td></tr>\
         <tr><th>User</th><td>{}</td></tr><tr><th>Transaction</th><td id=\"transaction\">{}</td></tr>\
         <tr><th>Started (UTC)</th><td>{}</td></tr>\
         <tr><th>Duration</th><td>{}</td></tr><tr><th>Rows</th><td>{}</td></tr>",
        escape(&s.user),
        s.transaction.map_or_else(|| "its own".to_string(), |t| format!("block {t}")),
        escape(&s.started),
        html::duration(std::time::Duration::from_secs_f64(s.duration_ms / 1000.0)),
        s.rows.map_or_else(|| "—".to_string(), count),
        state = s.state,
        pid = s.connection,
    );
    if let Some(engine) = &s.spark {
        let _ = write!(body, "<tr><th>Engine</th><td id=\"engine\">ran on Spark: {}</td></tr>", escape(engine));
    }
    if let (Some(code), Some(message)) = (&s.sqlstate, &s.error) {
        let _ =
            write!(body, "<tr><th>Error</th><td class=\"state-failed\">{} {}</td></tr>", escape(code), escape(message));
    }
    let _ = write!(body, "</table><pre id=\"sql\">{}</pre>", escape(&s.sql));
    if running {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/queries/{id}/cancel\"><button id=\"cancel\" type=\"submit\">Cancel \
             this statement</button></form>"
        );
    }
    match &detail.plan {
        None if s.spark.is_some() => match &detail.spark_plan {
            Some(plan) => {
                let _ = write!(body, "<h2>Spark's plan</h2><pre id=\"spark-plan\">{}</pre>", escape(plan));
            }
            None => body.push_str("<p>Spark's plan of this statement is not known yet.</p>"),
        },
        None => body.push_str("<p>This statement ran no query plan.</p>"),
        Some(plan) => {
            body.push_str(
                "<p class=\"legend\"><span style=\"border-color:#c62828;background:#ffebee\">shuffle exchange</span>\
                 <span style=\"border-color:#ef6c00;background:#fff3e0\">broadcast exchange</span>\
                 <span style=\"border-color:#2e7d32;background:#e8f5e9\">bucketed scan</span>\
                 <span style=\"border-color:#1565c0;background:#e3f2fd\">scan</span></p>",
            );
            let exchanges = plan.root.pre_order().iter().filter(|n| is_exchange(n.kind)).count();
            let _ = write!(
                body,
                "<p id=\"exchanges\">{}</p>",
                match exchanges {
                    0 => "No exchange: no rows move between partitions.".to_string(),
                    1 => "1 exchange moves rows.".to_string(),
                    n => format!("{n} exchanges move rows."),
                }
            );
            let heading = match plan.adaptive {
                Adaptive::No => "Plan",
                Adaptive::Planned => "Plan (adaptive, as planned: isFinalPlan=false)",
                Adaptive::Running => "Plan so far (adaptive: the stages run and running)",
                Adaptive::Final => "Final plan (adaptive: isFinalPlan=true)",
            };
            let whose = if s.spark.is_some() { "Spark's " } else { "" };
            let _ = write!(body, "<h2>{whose}{heading}</h2>{}", plan_svg::render(&plan.root, "final"));
            if let Some(initial) = &plan.initial {
                let _ = write!(body, "<h2>Initial plan</h2>{}", plan_svg::render(initial, "initial"));
            }
            if !detail.advice.is_empty() {
                body.push_str("<h2>Advice (Bucketing)</h2><ul class=\"notes\" id=\"advice\">");
                for line in &detail.advice {
                    let _ = write!(body, "<li>{}</li>", escape(line));
                }
                body.push_str("</ul>");
            }
            let _ = write!(
                body,
                "<p><a id=\"formatted\" href=\"/queries/{id}/plan.txt\">EXPLAIN FORMATTED text</a> · \
                 <a href=\"/api/v1/queries/{id}\">JSON</a></p>"
            );
            if let Some(text) = &detail.spark_plan {
                let _ = write!(body, "<h2>Spark's EXPLAIN FORMATTED</h2><pre id=\"spark-plan\">{}</pre>", escape(text));
            }
        }
    }
    page(&format!("Query {id}"), &body, running).into_response()
}

fn is_exchange(kind: NodeKind) -> bool {
    matches!(kind, NodeKind::ShuffleExchange | NodeKind::BroadcastExchange)
}

pub(super) async fn plan_text(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<u64>,
) -> Response {
    match api::visible_query(&state, &viewer, id).and_then(|r| r.graph()) {
        Some(graph) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], graph.formatted.clone()).into_response(),
        None => html::not_found(),
    }
}

/// Cancels a running statement, as a CancelRequest from its client would. Only a form of
/// this UI may ask: a browser sends the page's origin with the form, which must be this host.
pub(super) async fn cancel(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    let same_origin = match (origin, host) {
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(_, rest)| rest == host),
        (None, _) => true,
        _ => false,
    };
    if !same_origin {
        return html::error_page(StatusCode::FORBIDDEN, "Statements are cancelled from this UI's own pages.");
    }
    let Some(record) = api::visible_query(&state, &viewer, id) else { return html::not_found() };
    if record.outcome().is_some() {
        return html::error_page(StatusCode::CONFLICT, "This statement has ended already.");
    }
    record.cancel();
    Redirect::to(&format!("/queries/{id}")).into_response()
}

/// `pg_stat_statements`: each normalised statement's calls, times, rows and what its plans
/// shuffled, most called first.
pub(super) async fn statements(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
) -> Html<String> {
    let statements = api::visible_statements(&state, &viewer);
    let ms = |ms: f64| html::duration(std::time::Duration::from_secs_f64(ms / 1000.0));
    let rows = statements.iter().map(|s| {
        format!(
            "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"sql\">{}</td>",
            escape(&s.user),
            count(s.calls),
            ms(s.total_ms),
            ms(s.mean_ms),
            ms(s.max_ms),
            count(s.rows),
            count(s.exchanges),
            bytes(s.bytes_shuffled),
            count(s.buckets_pruned),
            escape(&s.query),
        )
    });
    let body = if statements.is_empty() {
        "<p>No statements counted yet (or since <code>pg_stat_statements_reset()</code>).</p>".to_string()
    } else {
        html::table(
            &["User", "Calls", "Total", "Mean", "Max", "Rows", "Exchanges", "Shuffled", "Buckets pruned", "Statement"],
            rows,
        )
    };
    page("Statements", &body, false)
}

/// The server's series in Prometheus' text format, the memory pool's read now.
pub(super) async fn metrics(State(state): State<Arc<UiState>>) -> Response {
    let engine = &state.engine;
    METRICS.memory_used.set(engine.runtime.memory_pool.reserved() as i64);
    METRICS.memory_limit.set(engine.memory_limit.unwrap_or(0) as i64);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], METRICS.render()).into_response()
}

pub(super) async fn tables(State(state): State<Arc<UiState>>) -> Response {
    let tables = match api::tables_of(&state) {
        Ok(tables) => tables,
        Err(e) => return html::error_page(StatusCode::INTERNAL_SERVER_ERROR, &e),
    };
    let rows = api::table_summaries(&tables).into_iter().map(|t| {
        format!(
            "<td><a href=\"/tables/{schema}/{name}\">{schema}.{name}</a></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            escape(&t.partition_columns.join(", ")),
            escape(&t.bucket_columns.join(", ")),
            escape(&t.sort_columns.join(", ")),
            t.num_buckets.map_or_else(String::new, |n| n.to_string()),
            count(t.files as u64),
            count(t.rows),
            bytes(t.bytes),
            schema = escape(&t.schema),
            name = escape(&t.name),
        )
    });
    let body = if tables.is_empty() {
        "<p>No tables yet.</p>".to_string()
    } else {
        html::table(&["Table", "Partitioned by", "Bucketed by", "Sorted by", "Buckets", "Files", "Rows", "Size"], rows)
    };
    page("Tables", &body, false).into_response()
}

pub(super) async fn table(State(state): State<Arc<UiState>>, Path((schema, name)): Path<(String, String)>) -> Response {
    let detail = match api::table_of(&state, &schema, &name) {
        Ok(Some(detail)) => detail,
        Ok(None) => return html::not_found(),
        Err(e) => return html::error_page(StatusCode::INTERNAL_SERVER_ERROR, &e),
    };
    let t = &detail.summary;
    let none = || "—".to_string();
    let list = |items: &[String]| if items.is_empty() { none() } else { escape(&items.join(", ")) };
    let mut body = format!(
        "<table class=\"list\"><tr><th>Provider</th><td>{}</td></tr><tr><th>Location</th><td>{}</td></tr>\
         <tr><th>Columns</th><td>{}</td></tr><tr><th>Partitioned by</th><td>{}</td></tr>\
         <tr><th>Partitions</th><td>{}</td></tr><tr><th>Bucketed by</th><td>{}</td></tr>\
         <tr><th>Sorted by</th><td>{}</td></tr><tr><th>Buckets</th><td>{}</td></tr>\
         <tr><th>Files</th><td>{}</td></tr><tr><th>Rows</th><td>{}</td></tr><tr><th>Size</th><td>{}</td></tr>",
        escape(&t.provider),
        escape(&t.location),
        escape(&detail.columns.iter().map(|c| format!("{} {}", c.name, c.ty)).collect::<Vec<_>>().join(", ")),
        list(&t.partition_columns),
        count(detail.partitions as u64),
        list(&t.bucket_columns),
        list(&t.sort_columns),
        t.num_buckets.map_or_else(none, |n| n.to_string()),
        count(t.files as u64),
        count(t.rows),
        bytes(t.bytes),
    );
    if let Some(skew) = detail.skew {
        let _ = write!(body, "<tr><th>Bucket skew</th><td>{skew:.2} (largest bucket over the mean, by rows)</td></tr>");
    }
    body.push_str("</table>");
    if !detail.buckets.is_empty() {
        let _ = write!(body, "<h2>Rows per bucket</h2>{}", histogram(&detail.buckets));
        let rows = detail.buckets.iter().map(|b| {
            format!(
                "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                b.bucket,
                count(b.files),
                count(b.rows),
                bytes(b.bytes)
            )
        });
        body.push_str(&html::table(&["Bucket", "Files", "Rows", "Size"], rows));
    }
    page(&format!("Table {}.{}", t.schema, t.name), &body, false).into_response()
}

/// One bar per bucket, its height its rows; bars at twice the mean or more in red, with the
/// mean drawn across.
fn histogram(buckets: &[Bucket]) -> String {
    const HEIGHT: f64 = 160.0;
    const TOP: f64 = 10.0;
    let bar = (720.0 / buckets.len() as f64).clamp(2.0, 40.0);
    let gap = if bar > 6.0 { 2.0 } else { 0.0 };
    let width = bar * buckets.len() as f64 + 20.0;
    let most = buckets.iter().map(|b| b.rows).max().unwrap_or(0).max(1) as f64;
    let mean = buckets.iter().map(|b| b.rows).sum::<u64>() as f64 / buckets.len() as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"bucket-histogram\" width=\"{width:.0}\" \
         height=\"{:.0}\" font-size=\"11\">",
        HEIGHT + TOP + 20.0
    );
    for (i, b) in buckets.iter().enumerate() {
        let h = HEIGHT * b.rows as f64 / most;
        let color = if mean > 0.0 && b.rows as f64 >= 2.0 * mean { "#c62828" } else { "#1565c0" };
        let _ = write!(
            svg,
            "<rect class=\"bucket-bar\" data-bucket=\"{}\" data-rows=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" \
             height=\"{h:.1}\" fill=\"{color}\"><title>bucket {}: {} rows, {} files, {}</title></rect>",
            b.bucket,
            b.rows,
            10.0 + bar * i as f64,
            TOP + HEIGHT - h,
            bar - gap,
            b.bucket,
            count(b.rows),
            b.files,
            bytes(b.bytes)
        );
    }
    let mean_y = TOP + HEIGHT - HEIGHT * mean / most;
    let _ = write!(
        svg,
        "<line x1=\"10\" x2=\"{:.1}\" y1=\"{mean_y:.1}\" y2=\"{mean_y:.1}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>\
         <text x=\"10\" y=\"{:.1}\">mean {} rows · buckets 0 to {}</text></svg>",
        width - 10.0,
        TOP + HEIGHT + 15.0,
        count(mean.round() as u64),
        buckets.len() - 1
    );
    svg
}

pub(super) async fn connections(State(state): State<Arc<UiState>>, Extension(viewer): Extension<Viewer>) -> Response {
    let connections = api::visible_connections(&state, &viewer);
    let rows = connections.iter().map(|c| {
        format!(
            "<td><a href=\"/connections/{pid}/settings\">{pid}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td class=\"sql\">{}</td>",
            escape(&c.user),
            escape(c.client.as_deref().unwrap_or("")),
            escape(&c.application_name),
            c.state,
            escape(&c.backend_start),
            escape(&c.query),
            pid = c.pid,
        )
    });
    let body = html::table(&["Pid", "User", "Client", "Application", "State", "Connected", "Last statement"], rows);
    page("Connections", &body, false).into_response()
}

pub(super) async fn settings(
    State(state): State<Arc<UiState>>,
    Extension(viewer): Extension<Viewer>,
    Path(pid): Path<i32>,
) -> Response {
    let Some((connection, settings)) = api::connection_settings(&state, &viewer, pid) else {
        return html::error_page(StatusCode::NOT_FOUND, "No such connection: it may have closed.");
    };
    let rows = settings.iter().map(|s| {
        let class = if s.overridden { " class=\"override\"" } else { "" };
        format!(
            "<td{class}>{}</td><td{class}>{}</td><td>{}</td><td>{}</td>",
            escape(&s.key),
            escape(&s.value),
            escape(s.default.unwrap_or("")),
            if s.overridden { "set by the session" } else { "default" }
        )
    });
    let body = format!(
        "<p>Connection {} of {} ({}). Settings the session has set are highlighted.</p>{}",
        connection.pid,
        escape(&connection.user),
        escape(connection.client.as_deref().unwrap_or("no client")),
        html::table(&["Key", "Value", "Default", "Source"], rows)
    );
    page(&format!("Settings of connection {pid}"), &body, false).into_response()
}

pub(super) async fn not_found() -> Response {
    html::not_found()
}
