//! Queries and EXPLAIN on Spark: the session's Spark settings sent first, the tables the
//! statement reads registered, the parameters bound, then the statement's own text, so that
//! Spark parses what the client wrote. Rows stream back as Spark sends them; EXPLAIN is
//! Spark's own plan (`AnalyzePlan`), FORMATTED with our bucketing section and advice computed
//! from it, followed by the engine it ran on and why.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::Statement;
use futures::StreamExt;

use super::routing::{Relations, Route, relations};
use super::{catalog_sync, parameters};
use crate::error::SqlError;
use crate::exec::spark_connect::{SparkConnect, SparkExplainMode};
use crate::explain::graph::PlanGraph;
use crate::explain::{ExplainMode, spark_formatted};
use crate::sql::history::QueryRecord;
use crate::sql::output::{Output, plan_schema, rows_output};
use crate::sql::session::Session;

/// The session time zone Spark is given unless the session sets its own: this server's.
const SESSION_TIME_ZONE: (&str, &str) = ("spark.sql.session.timeZone", "UTC");

/// Runs query `stmt`, whose text is `text`, on Spark.
pub(crate) async fn query(
    session: &Session,
    text: &str,
    stmt: &Statement,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    let sql = parameters::bind(text, &params)?;
    let record = mark_on_spark(session);
    let relations = relations(session, stmt)?;
    let tables = Arc::new(relations.tables.clone());
    let conf = session.spark_conf();
    let rows = on_spark(session, &relations, |spark, id| {
        // Spark's plan for the web UI, fetched beside the query once its tables are known there.
        if let Some(record) = record.clone() {
            let (spark, id, sql) = (Arc::clone(&spark), id.clone(), sql.clone());
            let (tables, conf) = (Arc::clone(&tables), conf.clone());
            tokio::spawn(async move {
                match spark.explain(&id, sql, SparkExplainMode::Formatted).await {
                    Ok(text) => match PlanGraph::of_spark(&text, &tables, &conf) {
                        // The graph holds the text with its sections already.
                        Some(graph) => record.spark_planned(graph.formatted.clone(), Some(graph)),
                        None => record.spark_planned(text, None),
                    },
                    Err(e) => tracing::debug!(error = %e, "no Spark plan for the web UI"),
                }
            });
        }
        let sql = sql.clone();
        async move { spark.execute(&id, sql).await }
    })
    .await?;
    let stream = rows.batches.map(|batch| batch.map_err(DataFusionError::from));
    Ok(Output::Rows {
        schema: Arc::clone(&rows.schema),
        stream: Box::pin(RecordBatchStreamAdapter::new(rows.schema, stream)),
    })
}

/// Spark's EXPLAIN of query `stmt`. `text` is the EXPLAIN statement's.
pub(crate) async fn explain(
    session: &Session,
    text: &str,
    stmt: &Statement,
    mode: ExplainMode,
    params: Vec<ScalarValue>,
    route: &Route,
) -> Result<Output, SqlError> {
    let spark_mode = match mode {
        ExplainMode::Simple => SparkExplainMode::Simple,
        ExplainMode::Extended => SparkExplainMode::Extended,
        ExplainMode::Formatted => SparkExplainMode::Formatted,
        ExplainMode::Cost => SparkExplainMode::Cost,
        ExplainMode::Codegen => SparkExplainMode::Codegen,
        ExplainMode::Analyze => return Err(SqlError::internal("EXPLAIN ANALYZE runs here")),
    };
    let query = explained_text(text).map_or_else(|| stmt.to_string(), str::to_string);
    let sql = parameters::bind(&query, &params)?;
    let relations = relations(session, stmt)?;
    let mut plan = on_spark(session, &relations, |spark, id| {
        let sql = sql.clone();
        async move { spark.explain(&id, sql, spark_mode).await }
    })
    .await?;
    if mode == ExplainMode::Formatted {
        plan = spark_formatted(&plan, &relations.tables, &session.spark_conf());
    }
    let url = session.engine.spark.as_ref().map(|s| s.url().to_string()).unwrap_or_default();
    plan.push_str(&engine_section(&format!("Spark Connect at {url}"), route));
    let batch = RecordBatch::try_new(plan_schema(), vec![Arc::new(StringArray::from(vec![plan])) as ArrayRef])?;
    Ok(rows_output(plan_schema(), vec![batch]))
}

/// Shows in `pg_stat_activity` and the web UI that the running statement runs on Spark; its
/// record in the query history, where the history keeps it.
pub(crate) fn mark_on_spark(session: &Session) -> Option<Arc<QueryRecord>> {
    let spark = session.engine.spark.as_ref()?;
    session.backend.runs_on_spark();
    session.running.runs_on_spark(spark.url().to_string())
}

/// EXPLAIN's last section: where the statement runs, and why.
pub(crate) fn engine_section(engine: &str, route: &Route) -> String {
    format!("\n== Engine ==\n{engine} ({})\n", route.reason)
}

/// The query an EXPLAIN statement's text explains: past `EXPLAIN` and its mode word. `None`
/// where the text does not begin so (a comment first), and the parsed statement is printed.
fn explained_text(text: &str) -> Option<&str> {
    let rest = text.trim_start();
    let rest = rest.get(..7).filter(|w| w.eq_ignore_ascii_case("explain")).map(|_| &rest[7..])?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let word_end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    let word = rest[..word_end].to_ascii_uppercase();
    let rest = match word.as_str() {
        "EXTENDED" | "FORMATTED" | "COST" | "CODEGEN" | "VERBOSE" => &rest[word_end..],
        _ => rest,
    };
    Some(rest.trim_start())
}

/// Calls `call` with the Spark client and the session's Spark session, once the session's
/// settings and the tables a statement reads, `relations`, are up to date there. A table Spark does not know
/// although it was registered means Spark lost its catalog (it restarted): the tables are
/// registered again and the call made once more.
pub(crate) async fn on_spark<T, F, Fut>(session: &Session, relations: &Relations, call: F) -> Result<T, SqlError>
where
    F: Fn(Arc<SparkConnect>, String) -> Fut,
    Fut: Future<Output = Result<T, SqlError>>,
{
    let spark = session.engine.spark.clone().ok_or_else(|| SqlError::internal("no Spark Connect server"))?;
    let id = session.spark_session_id().to_string();
    let mut retried = false;
    loop {
        configure(session, &spark, &id).await?;
        catalog_sync::sync(session, &spark, &id, relations).await?;
        match call(Arc::clone(&spark), id.clone()).await {
            Err(e) if e.code == "42P01" && !retried => {
                retried = true;
                catalog_sync::forget_all(&spark).await;
            }
            result => return result,
        }
    }
}

/// Sends the session's Spark settings (`spark.*`) to its Spark session, and unsets those it
/// sent before and has reset since.
async fn configure(session: &Session, spark: &SparkConnect, id: &str) -> Result<(), SqlError> {
    let mut set = session.spark_settings();
    if !set.iter().any(|(key, _)| key == SESSION_TIME_ZONE.0) {
        set.push((SESSION_TIME_ZONE.0.to_string(), SESSION_TIME_ZONE.1.to_string()));
    }
    let keys: BTreeSet<String> = set.iter().map(|(key, _)| key.clone()).collect();
    // Counted as sent before the call: a failed call leaves keys to unset next time, which
    // is harmless.
    let unset = session.spark_settings_sent(keys);
    spark.configure(id, set, unset).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_query_an_explain_explains() {
        assert_eq!(explained_text("EXPLAIN SELECT 1"), Some("SELECT 1"));
        assert_eq!(explained_text("  explain formatted\n SELECT * FROM t"), Some("SELECT * FROM t"));
        assert_eq!(
            explained_text("EXPLAIN COST WITH c AS (SELECT 1) SELECT * FROM c"),
            Some("WITH c AS (SELECT 1) SELECT * FROM c")
        );
        assert_eq!(explained_text("EXPLAIN selected_view"), Some("selected_view"));
        assert_eq!(explained_text("/* c */ EXPLAIN SELECT 1"), None);
        assert_eq!(explained_text("EXPLAINX SELECT 1"), None);
    }
}
