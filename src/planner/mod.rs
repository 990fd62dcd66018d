//! Our physical planner: Spark 4.x's decisions about scans, joins and data movement, made on
//! the plan DataFusion lowers a query to, one file per Spark rule.
//!
//! DataFusion lowers the optimized logical plan without any of its own physical rules (its
//! join selection and distribution enforcement assume its own hash function); then, in
//! Spark's order: `ResolveGroupingAnalytics` (Spark's analyzer puts `Expand` under grouping
//! sets), `JoinSelection`, `CoalesceBucketsInJoin`, `EnsureRequirements`,
//! `DisableUnnecessaryBucketedScan`, followed by DataFusion rules that do not move rows
//! between partitions (combining adjacent partial and final aggregates, limit pushdown,
//! cooperative scheduling), then aggregates that find their groups in order where rows arrive
//! grouped (`exec::hash_aggregate`), and `ReuseExchangeAndSubquery`. With `spark.sql.adaptive.enabled` the plan then runs stage by
//! stage (`adaptive`), re-planned with what each finished stage produced.

pub mod adaptive;
pub mod bucketing;
pub mod cooperative_joins;
pub mod decimal_precision;
pub mod distribution;
pub mod ensure_requirements;
pub mod extract_equi_join_keys;
pub mod file_source_strategy;
pub mod hints;
pub mod infer_filters_from_constraints;
pub mod join_selection;
pub mod keep_null_safe_joins;
pub mod keep_sort_keys;
pub mod overridden_rule;
pub mod reorder_join_keys;
pub mod replace_except_intersect_with_joins;
pub mod resolve_grouping_analytics;
pub mod reuse_exchange;
pub mod scan_lineage;
pub mod single_distinct_aggregate;
pub mod statistics;
pub mod table_provider;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod union_output_nullability;
pub mod union_output_partitioning;
pub mod unwrap_cast_in_binary_comparison;

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::{Analyzer, AnalyzerRule, Optimizer, OptimizerRule};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::combine_partial_final_agg::CombinePartialFinalAggregate;
use datafusion::physical_optimizer::ensure_coop::EnsureCooperative;
use datafusion::physical_optimizer::limit_pushdown::LimitPushdown;
use datafusion::physical_plan::ExecutionPlan;

use crate::config::SparkConf;
use crate::exec::hash_aggregate::HashAggregateExec;
use crate::exec::sort::SortExec;
use bucketing::coalesce_buckets_in_join::coalesce_buckets_in_join;
use bucketing::disable_unnecessary_bucketed_scan::disable_unnecessary_bucketed_scan;
use cooperative_joins::cooperative_joins;
use decimal_precision::DecimalPrecision;
use ensure_requirements::ensure_requirements;
use hints::QueryHints;
use infer_filters_from_constraints::InferFiltersFromConstraints;
use join_selection::join_selection;
use keep_null_safe_joins::KeepNullSafeJoins;
use keep_sort_keys::KeepSortKeys;
use replace_except_intersect_with_joins::ReplaceExceptIntersectWithJoins;
use resolve_grouping_analytics::resolve_grouping_analytics;
use reuse_exchange::reuse_exchanges;
use single_distinct_aggregate::{SingleDistinctAggregate, split_inner_aggregates};
use union_output_nullability::UnionOutputNullability;
use unwrap_cast_in_binary_comparison::UnwrapCastInBinaryComparison;

/// DataFusion's analyzer rules, with Spark's choice of DOUBLE over DECIMAL made before its
/// type coercion.
pub fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = Analyzer::new().rules;
    let coercion = rules.iter().position(|rule| rule.name() == "type_coercion").unwrap_or(rules.len());
    rules.insert(coercion, Arc::new(DecimalPrecision));
    rules
}

/// DataFusion's logical rules, with its single-distinct rewrite keeping Spark's result types, its
/// cross-join elimination keeping NULL-safe joins apart and its sorts keeping their keys; then Spark's shape for EXCEPT and
/// INTERSECT, and its inferred `isnotnull` filters last.
pub fn logical_rules() -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let (single_distinct, cross_join, sort_keys, simplify) = (
        SingleDistinctAggregate::default(),
        KeepNullSafeJoins::default(),
        KeepSortKeys::default(),
        UnwrapCastInBinaryComparison::default(),
    );
    let mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>> = Optimizer::new()
        .rules
        .into_iter()
        .map(|rule| -> Arc<dyn OptimizerRule + Send + Sync> {
            match rule.name() {
                name if name == single_distinct.name() => Arc::new(SingleDistinctAggregate::default()),
                name if name == cross_join.name() => Arc::new(KeepNullSafeJoins::default()),
                name if name == sort_keys.name() => Arc::new(KeepSortKeys::default()),
                name if name == simplify.name() => Arc::new(UnwrapCastInBinaryComparison::default()),
                _ => rule,
            }
        })
        .collect();
    rules.push(Arc::new(ReplaceExceptIntersectWithJoins));
    rules.push(Arc::new(InferFiltersFromConstraints));
    rules.push(Arc::new(UnionOutputNullability));
    rules
}

/// Plans `plan` for execution. The session's [`SparkConf`] must be installed in `state`.
pub async fn create_physical_plan(
    state: &SessionState,
    plan: &LogicalPlan,
    hints: &QueryHints,
) -> Result<Arc<dyn ExecutionPlan>> {
    let conf = state.config().get_extension::<SparkConf>().map(|c| (*c).clone()).unwrap_or_default();
    let lowered = SortExec::replace_external_sorts(state.create_physical_plan(plan).await?)?;
    let plan = resolve_grouping_analytics(lowered)?;
    let plan = join_selection(plan, &conf, hints)?;
    let plan = coalesce_buckets_in_join(plan, &conf)?;
    let plan = ensure_requirements(plan, &conf)?;
    let options = state.config_options();
    let plan = split_inner_aggregates(CombinePartialFinalAggregate::new().optimize(plan, options)?)?;
    let plan = disable_unnecessary_bucketed_scan(plan, &conf)?;
    let plan = LimitPushdown::new().optimize(plan, options)?;
    let plan = EnsureCooperative::new().optimize(cooperative_joins(plan)?, options)?;
    let plan = HashAggregateExec::wrap_aggregates(plan)?;
    reuse_exchanges(plan, conf.exchange_reuse && !conf.adaptive_enabled)
}
