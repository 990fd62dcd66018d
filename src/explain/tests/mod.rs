//! Plans built by hand in the shapes of Spark 4.3's own EXPLAIN output
//! (/work/shared/spark-plans/examples-spark-4.3.0.txt), compared line for line. The expected
//! texts are Spark's with the expression ids and plan ids renumbered to ours and
//! `{warehouse}` set to `/warehouse`. The tables, scans and operators the tests build plans
//! from are the planner's test fixtures (`planner::test_fixtures`); the tests are grouped by
//! theme in the files beside it.

mod aggregates;
mod joins;
mod modes;
mod operators;
mod scans;
mod spark;

use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{col, is_not_null};
use datafusion::physical_plan::filter::FilterExec;

use super::*;
use crate::config::SparkConf;
use crate::exec::file_source_scan::BucketedStatus;
use crate::exec::join_spec::{BuildSide, JoinStrategy};
use crate::planner::adaptive::AdaptiveSparkPlanExec;
use crate::planner::adaptive::insert_adaptive_spark_plan::should_apply;
use crate::planner::hints::QueryHints;
use crate::planner::table_provider::table_schema;
use crate::planner::test_fixtures::*;
// Over the EXPLAIN module's own `join`.
use crate::planner::test_fixtures::join;

/// EXPLAIN of `plan`, which runs adaptively if `adaptive` and Spark would (as the session plans it).
fn explain(plan: &Plan, mode: ExplainMode, adaptive: bool) -> String {
    let plan = if adaptive && should_apply(plan) {
        Arc::new(AdaptiveSparkPlanExec::new(Arc::clone(plan), SparkConf::default(), QueryHints::default()))
    } else {
        Arc::clone(plan)
    };
    spark_text(render(&plan, mode, &ExplainContext::default()))
}

/// The text Spark prints: what comes before our advice section, which `tests/table_statistics.rs`
/// checks over the wire.
fn spark_text(mut text: String) -> String {
    if let Some(advice) = text.find("\n== Advice (Bucketing) ==\n") {
        text.truncate(advice);
    }
    text
}
