//! Spark's `InsertAdaptiveSparkPlan`: with `spark.sql.adaptive.enabled`, a query whose plan
//! moves rows between partitions runs adaptively, stage by stage, under an
//! [`AdaptiveSparkPlanExec`]; any other plan runs as it is.
//!
//! Spark's `shouldApplyAQE` asks whether the plan holds an `Exchange` or an operator whose
//! `requiredChildDistribution` is specified. It is judged here on the operators Spark's plan
//! has for ours: our exchanges; joins other than a cartesian product; final aggregates;
//! windows; a global sort (one that does not keep its input's partitions) and the merge of
//! sorted partitions; DataFusion's gathering of partitions, which is Spark's `Exchange
//! SinglePartition`, and a limit below the root (`GlobalLimit`). At the root, a limit over a
//! gathering is Spark's `CollectLimit`, which requires nothing, so only what is below it
//! counts. Where we differ: Spark also applies it to subqueries (we plan none apart) and under
//! `spark.sql.adaptive.forceApply`, which is not one of our settings.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateOutputMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};

use super::AdaptiveSparkPlanExec;
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::JoinStrategy;
use crate::exec::plumbing::plumbing_input;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::exec::sort::SortExec;
use crate::planner::hints::QueryHints;

/// `plan` under an [`AdaptiveSparkPlanExec`] where adaptive execution is on and applies to it.
pub fn insert_adaptive_spark_plan(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
    hints: QueryHints,
) -> Arc<dyn ExecutionPlan> {
    if conf.adaptive_enabled && should_apply(&plan) {
        Arc::new(AdaptiveSparkPlanExec::new(plan, conf.clone(), hints))
    } else {
        plan
    }
}

/// Spark's `shouldApplyAQE` for a whole plan.
pub fn should_apply(plan: &Arc<dyn ExecutionPlan>) -> bool {
    moves_rows(plan, true)
}

/// Whether `plan` holds an exchange or an operator that requires a distribution of its
/// input, as Spark sees it; `at_root` while no operator Spark shows stands above.
fn moves_rows(plan: &Arc<dyn ExecutionPlan>, at_root: bool) -> bool {
    if let Some(inner) = plumbing_input(plan) {
        return moves_rows(inner, at_root);
    }
    if plan.is::<ShuffleExchangeExec>() || plan.is::<BroadcastExchangeExec>() || plan.is::<SortPreservingMergeExec>() {
        return true;
    }
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        return join.spec().strategy != JoinStrategy::Cartesian || children_move_rows(plan);
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        return aggregate.mode().output_mode() == AggregateOutputMode::Final || children_move_rows(plan);
    }
    if plan.is::<WindowAggExec>() || plan.is::<BoundedWindowAggExec>() {
        return true;
    }
    if let Some(sort) = plan.downcast_ref::<SortExec>() {
        // With a limit it is Spark's `TakeOrderedAndProject`, which requires nothing.
        return (sort.fetch().is_none() && !sort.preserve_partitioning()) || children_move_rows(plan);
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        return moves_rows(projection.input(), at_root);
    }
    if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
        return match (coalesce.fetch(), at_root) {
            (Some(_), true) => moves_rows(below_collect_limit(coalesce.input()), false),
            _ => true,
        };
    }
    if let Some(limit) = plan.downcast_ref::<GlobalLimitExec>() {
        return !at_root || moves_rows(below_collect_limit(limit.input()), false);
    }
    children_move_rows(plan)
}

fn children_move_rows(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.children().into_iter().any(|child| moves_rows(child, false))
}

/// What a `CollectLimit` at the root reads: below the gathering and the local limits it
/// stands for.
pub(crate) fn below_collect_limit(mut plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    loop {
        plan = if let Some(inner) = plumbing_input(plan) {
            inner
        } else if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
            coalesce.input()
        } else if let Some(limit) = plan.downcast_ref::<LocalLimitExec>() {
            limit.input()
        } else {
            return plan;
        };
    }
}
