//! Our physical planner: Spark 4.x's decisions about scans, joins and data movement, made on
//! the plan DataFusion lowers a query to, one file per Spark rule.
//!
//! DataFusion lowers the optimized logical plan without any of its own physical rules (its
//! join selection and distribution enforcement assume its own hash function); then
//! [`PHYSICAL_RULES`] run in Spark's order, each with the reason for its place. With
//! `spark.sql.adaptive.enabled`, Spark's `InsertAdaptiveSparkPlan`
//! (`adaptive::insert_adaptive_spark_plan`) makes a plan that moves rows between partitions run
//! stage by stage, re-planned with what each finished stage produced.

pub mod abandoned_planning;
pub mod adaptive;
pub mod ansi_arithmetic;
pub mod binary_arithmetic_with_datetime_resolver;
pub mod bucketing;
pub mod cast_from_string;
pub mod constant_folding;
pub mod cooperative_joins;
pub mod decimal_division;
pub mod decimal_precision;
pub mod distribution;
pub mod division;
pub mod ensure_requirements;
pub(crate) mod expression_rule;
pub mod extract_equi_join_keys;
pub mod file_source_strategy;
pub mod generate;
pub mod hints;
pub mod infer_filters_from_constraints;
pub mod join_selection;
pub mod keep_conjunct_order;
pub mod keep_inner_joins;
pub mod keep_null_safe_joins;
pub mod keep_semi_joins_unfiltered;
pub mod keep_sort_keys;
pub mod normalize_nan_and_zero;
pub mod overridden_rule;
pub mod pull_out_grouping_expressions;
pub mod push_down_left_semi_anti_join;
pub mod reorder_join_keys;
pub mod replace_except_intersect_with_joins;
pub mod resolve_grouping_analytics;
pub mod reuse_exchange;
pub mod rewrite_distinct_aggregates;
pub mod rewrite_except_intersect_all;
pub mod scan_lineage;
pub mod short_circuit_evaluation;
pub mod single_distinct_aggregate;
pub mod legacy_casts;
pub mod spark_casts;
pub mod statistics;
pub mod table_provider;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod union_output_nullability;
pub mod union_output_partitioning;
pub mod unwrap_cast_in_binary_comparison;
pub mod view_prefilter;
pub mod widen_set_operation_types;

use std::sync::Arc;

use datafusion::config::ConfigOptions;
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
use adaptive::insert_adaptive_spark_plan::insert_adaptive_spark_plan;
use ansi_arithmetic::AnsiArithmetic;
use binary_arithmetic_with_datetime_resolver::BinaryArithmeticWithDatetimeResolver;
use bucketing::coalesce_buckets_in_join::coalesce_buckets_in_join;
use bucketing::disable_unnecessary_bucketed_scan::disable_unnecessary_bucketed_scan;
use constant_folding::ConstantFolding;
use cooperative_joins::cooperative_joins;
use decimal_precision::DecimalPrecision;
use ensure_requirements::ensure_requirements;
use generate::Generate;
use hints::QueryHints;
use infer_filters_from_constraints::InferFiltersFromConstraints;
use join_selection::join_selection;
use keep_conjunct_order::KeepConjunctOrder;
use keep_inner_joins::KeepInnerJoins;
use keep_null_safe_joins::KeepNullSafeJoins;
use keep_semi_joins_unfiltered::KeepSemiJoinsUnfiltered;
use keep_sort_keys::KeepSortKeys;
use normalize_nan_and_zero::NormalizeNaNAndZero;
use pull_out_grouping_expressions::{name_keys_for_combining, pull_out_grouping_expressions};
use push_down_left_semi_anti_join::PushDownLeftSemiAntiJoin;
use replace_except_intersect_with_joins::ReplaceExceptIntersectWithJoins;
use resolve_grouping_analytics::resolve_grouping_analytics;
use reuse_exchange::reuse_exchanges;
use rewrite_distinct_aggregates::RewriteDistinctAggregates;
use rewrite_except_intersect_all::RewriteExceptIntersectAll;
use short_circuit_evaluation::short_circuit_evaluation;
use single_distinct_aggregate::{SingleDistinctAggregate, split_inner_aggregates};
use spark_casts::SparkCasts;
use union_output_nullability::UnionOutputNullability;
use unwrap_cast_in_binary_comparison::UnwrapCastInBinaryComparison;
use widen_set_operation_types::WidenSetOperationTypes;

/// DataFusion's analyzer rules, after Spark's `Generate` (which replaces a join DataFusion
/// cannot run), with Spark's days added to DATEs, then its choice of DOUBLE over DECIMAL and
/// its fractional `/` (one pass), made before its type coercion, ANSI mode's checked integral arithmetic
/// after it (when both operands have one type), then Spark's `RewriteExceptAll` and
/// `RewriteIntersectAll`: Spark runs them first in its optimizer, and only before
/// DataFusion's optimizer is an EXCEPT ALL's join told from a user's (see
/// [`rewrite_except_intersect_all`]); after type coercion, which gives both sides' columns one
/// type. `NormalizeNaNAndZero` comes once set operations are told by their plain keys, and
/// the errors of Spark's `ConstantFolding` last, before any of DataFusion's simplifications can
/// remove a failing constant that Spark evaluates first (a projection over no rows).
pub fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = Analyzer::new().rules;
    rules.insert(0, Arc::new(Generate));
    let coercion = |rules: &[Arc<dyn AnalyzerRule + Send + Sync>]| {
        rules.iter().position(|rule| rule.name() == "type_coercion").unwrap_or(rules.len())
    };
    let before = coercion(&rules);
    rules.insert(before, Arc::new(DecimalPrecision));
    rules.insert(before, Arc::new(BinaryArithmeticWithDatetimeResolver));
    let after = (coercion(&rules) + 1).min(rules.len());
    rules.insert(after, Arc::new(AnsiArithmetic));
    rules.insert(after + 1, Arc::new(SparkCasts));
    rules.push(Arc::new(WidenSetOperationTypes));
    rules.push(Arc::new(RewriteExceptIntersectAll));
    rules.push(Arc::new(NormalizeNaNAndZero));
    rules.push(Arc::new(ConstantFolding));
    rules
}

/// DataFusion's logical rules, with Spark's rewrite of several distinct aggregates before its
/// single-distinct rewrite, which keeps Spark's result types, its cross-join elimination
/// keeping NULL-safe joins apart, its sorts keeping their keys and its `isnotnull` of join keys
/// kept off semi and anti joins; then Spark's shape for EXCEPT and INTERSECT, its semi and
/// anti joins pushed below other joins, and its inferred `isnotnull` filters last.
pub fn logical_rules() -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let (single_distinct, cross_join, sort_keys, simplify, null_keys, inner_joins, filters) = (
        SingleDistinctAggregate::default(),
        KeepNullSafeJoins::default(),
        KeepSortKeys::default(),
        UnwrapCastInBinaryComparison::default(),
        KeepSemiJoinsUnfiltered::default(),
        KeepInnerJoins::default(),
        KeepConjunctOrder::default(),
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
                name if name == null_keys.name() => Arc::new(KeepSemiJoinsUnfiltered::default()),
                name if name == inner_joins.name() => Arc::new(KeepInnerJoins::default()),
                name if name == filters.name() => Arc::new(KeepConjunctOrder::default()),
                _ => rule,
            }
        })
        .collect();
    // Beside the single-distinct rewrite: several sets of distinct arguments, Spark's way.
    let at = rules.iter().position(|rule| rule.name() == single_distinct.name()).unwrap_or(rules.len());
    rules.insert(at, Arc::new(RewriteDistinctAggregates));
    rules.push(Arc::new(ReplaceExceptIntersectWithJoins));
    rules.push(Arc::new(PushDownLeftSemiAntiJoin));
    rules.push(Arc::new(InferFiltersFromConstraints));
    rules.push(Arc::new(UnionOutputNullability));
    rules
}

/// What a physical rule reads besides the plan.
pub struct RuleContext<'a> {
    pub conf: &'a SparkConf,
    pub hints: &'a QueryHints,
    pub options: &'a ConfigOptions,
}

/// One step of physical planning; the comment above each in [`PHYSICAL_RULES`] says why it
/// stands where it does.
pub struct PhysicalRule {
    /// Spark's name for the rule, or ours where Spark has none.
    pub name: &'static str,
    pub apply: fn(Plan, &RuleContext) -> Result<Plan>,
}

type Plan = Arc<dyn ExecutionPlan>;

/// The physical rules in the order they run, on the plan DataFusion lowers the optimized
/// logical plan to with none of its own physical rules. Spark's `QueryExecution` runs
/// `JoinSelection` while planning, then its preparations (`EnsureRequirements` and what
/// follows); our steps keep that order.
pub const PHYSICAL_RULES: &[PhysicalRule] = &[
    // First: Spark's analyzer puts the Expand under a grouping-sets aggregate before any planning,
    // so every later rule sees Spark's shape.
    PhysicalRule { name: "ResolveGroupingAnalytics", apply: |plan, _| resolve_grouping_analytics(plan) },
    // Spark's optimizer pulls grouping expressions out before planning, so the exchange between
    // the aggregates that EnsureRequirements adds hashes the projected column.
    PhysicalRule { name: "PullOutGroupingExpressions", apply: |plan, _| pull_out_grouping_expressions(plan) },
    // Spark chooses each join's strategy while planning, before any exchange exists: broadcast,
    // shuffled hash or sort-merge decide which distributions the sides must have.
    PhysicalRule { name: "JoinSelection", apply: |plan, rule| join_selection(plan, rule.conf, rule.hints) },
    // Before EnsureRequirements, as in Spark's preparations: a scan read in fewer buckets satisfies
    // its join, so no exchange is planned for it.
    PhysicalRule { name: "CoalesceBucketsInJoin", apply: |plan, rule| coalesce_buckets_in_join(plan, rule.conf) },
    // Once every operator's required distribution and ordering is known: it adds the exchanges and
    // sorts that are missing, and reorders join keys to match the sides' partitioning.
    PhysicalRule { name: "EnsureRequirements", apply: |plan, rule| ensure_requirements(plan, rule.conf) },
    // After EnsureRequirements, which leaves a partial and a final aggregate adjacent where no
    // exchange was needed between them; inner aggregates of a distinct rewrite are then split again
    // into Spark's four.
    PhysicalRule {
        name: "CombinePartialFinalAggregate",
        apply: |plan, rule| {
            let combined =
                CombinePartialFinalAggregate::new().optimize(name_keys_for_combining(plan)?, rule.options)?;
            split_inner_aggregates(combined)
        },
    },
    // After EnsureRequirements, which alone knows whether an operator above used a scan's
    // bucketing: a scan whose buckets nothing needs is read as plain files.
    PhysicalRule {
        name: "DisableUnnecessaryBucketedScan",
        apply: |plan, rule| disable_unnecessary_bucketed_scan(plan, rule.conf),
    },
    // DataFusion's, on the final shape: it moves no rows between partitions, so it must not run
    // before the exchanges are placed.
    PhysicalRule { name: "LimitPushdown", apply: |plan, rule| LimitPushdown::new().optimize(plan, rule.options) },
    // DataFusion's cooperative scheduling of long-running operators, over the joins as well, once
    // no rule changes the operators any more.
    PhysicalRule {
        name: "EnsureCooperative",
        apply: |plan, rule| EnsureCooperative::new().optimize(cooperative_joins(plan)?, rule.options),
    },
    // Ours: aggregates find their groups as runs of equal keys where rows arrive grouped, which is
    // only known once the sorts and exchanges below are final.
    PhysicalRule { name: "HashAggregateInOrder", apply: |plan, _| HashAggregateExec::wrap_aggregates(plan) },
    // Spark's lazy AND and OR, once no rule reads a condition any more, and before identical
    // exchanges are found, which must see each filter as it runs.
    PhysicalRule { name: "ShortCircuitEvaluation", apply: |plan, _| short_circuit_evaluation(plan) },
    // Last, as in Spark: identical exchanges are only identical once nothing below them changes;
    // under adaptive execution the query stages are reused instead.
    PhysicalRule {
        name: "ReuseExchangeAndSubquery",
        apply: |plan, rule| reuse_exchanges(plan, rule.conf.exchange_reuse && !rule.conf.adaptive_enabled),
    },
];

/// Plans `plan` into the plan that runs: [`create_static_plan`], then, with
/// `spark.sql.adaptive.enabled`, Spark's `InsertAdaptiveSparkPlan`. The session's
/// [`SparkConf`] must be installed in `state`.
pub async fn create_physical_plan(
    state: &SessionState,
    plan: &LogicalPlan,
    hints: &QueryHints,
) -> Result<Arc<dyn ExecutionPlan>> {
    let physical = create_static_plan(state, plan, hints).await?;
    let conf = SparkConf::of(state.config())?;
    Ok(insert_adaptive_spark_plan(physical, &conf, hints.clone()))
}

/// Plans `plan` with [`PHYSICAL_RULES`], to run as it is: a write runs its query so, its
/// rows going straight to the table's writers.
pub async fn create_static_plan(
    state: &SessionState,
    plan: &LogicalPlan,
    hints: &QueryHints,
) -> Result<Arc<dyn ExecutionPlan>> {
    let conf = SparkConf::of(state.config())?;
    let context = RuleContext { conf: &conf, hints, options: state.config_options() };
    let lowered = SortExec::replace_external_sorts(state.create_physical_plan(plan).await?)?;
    PHYSICAL_RULES.iter().try_fold(lowered, |plan, rule| {
        tracing::trace!(rule = rule.name, "physical rule");
        (rule.apply)(plan, &context)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each rule needs what the rules before it leave (see the comment above each).
    #[test]
    fn physical_rules_run_in_spark_order() {
        let names: Vec<&str> = PHYSICAL_RULES.iter().map(|rule| rule.name).collect();
        assert_eq!(
            names,
            [
                "ResolveGroupingAnalytics",
                "PullOutGroupingExpressions",
                "JoinSelection",
                "CoalesceBucketsInJoin",
                "EnsureRequirements",
                "CombinePartialFinalAggregate",
                "DisableUnnecessaryBucketedScan",
                "LimitPushdown",
                "EnsureCooperative",
                "HashAggregateInOrder",
                "ShortCircuitEvaluation",
                "ReuseExchangeAndSubquery",
            ]
        );
    }
}
