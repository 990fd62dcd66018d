//! Spark's adaptive query execution (`execution/adaptive/`): the plan runs stage by stage,
//! and what finished stages produced re-plans the rest.
//!
//! [`AdaptiveSparkPlanExec`] runs every exchange whose input holds no unfinished exchange as a
//! query stage (all such at once), then re-plans the rest with the stages' statistics — a
//! sort-merge join whose side turned out small becomes a broadcast hash join
//! (`dynamic_join_selection`), skewed partitions of a sort-merge join are split
//! (`optimize_skewed_join`) — and repeats; the plan between stages (and finally the last one)
//! gets its shuffle reads chosen as it is about to run: small partitions coalesced
//! (`coalesce_shuffle_partitions`) and outputs read locally where the partitioning is not
//! needed (`optimize_shuffle_with_local_read`); then, ours, a sort-merge join over coalesced
//! partitions joins their shuffle partitions one by one (`join_shuffle_partitions_apart`). Before any stage runs, one side
//! of a shuffled join may be set to wait for the other and drop the rows whose keys that side
//! lacks (`inject_runtime_filter`). A rewrite that would break a distribution an
//! operator needs is not made (`validate_requirements`).

pub mod adaptive_spark_plan;
pub mod aqe_propagate_empty_relation;
pub mod coalesce_shuffle_partitions;
pub mod dynamic_join_selection;
pub mod inject_runtime_filter;
pub mod insert_adaptive_spark_plan;
pub mod join_shuffle_partitions_apart;
pub mod optimize_shuffle_with_local_read;
pub mod optimize_skewed_join;
pub mod plan_adaptive_subqueries;
pub mod read_twin_exchanges;
pub mod shuffle_partitions_util;
pub mod validate_requirements;

use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::shuffle_exchange::ExchangePartitioning;
pub use adaptive_spark_plan::AdaptiveSparkPlanExec;

/// A finished stage or a read of one; rules do not look below it.
fn is_query_stage(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<ShuffleQueryStageExec>() || plan.is::<BroadcastQueryStageExec>()
}

/// `plan` with each node of `targets` (the very node) replaced by the node of `by` at its
/// place: an exchange by its stage, or by itself over a new input. Finished stages are not
/// looked into.
fn replace_nodes(
    plan: Arc<dyn ExecutionPlan>,
    targets: &[Arc<dyn ExecutionPlan>],
    by: &[Arc<dyn ExecutionPlan>],
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_down(|node| match targets.iter().position(|target| Arc::ptr_eq(target, &node)) {
        Some(i) => Ok(Transformed::new(Arc::clone(&by[i]), true, TreeNodeRecursion::Jump)),
        None if is_query_stage(&node) => Ok(Transformed::new(node, false, TreeNodeRecursion::Jump)),
        None => Ok(Transformed::no(node)),
    })
    .map(|t| t.data)
}

/// A shuffle stage as an operator reads it: directly, or through an adaptive read (Spark's
/// `ShuffleStageInfo`).
struct StageRead<'a> {
    /// The stage node itself.
    node: &'a Arc<dyn ExecutionPlan>,
    stage: &'a ShuffleQueryStageExec,
    read: Option<&'a AqeShuffleReadExec>,
}

impl<'a> StageRead<'a> {
    fn of(plan: &'a Arc<dyn ExecutionPlan>) -> Option<Self> {
        if let Some(stage) = plan.downcast_ref::<ShuffleQueryStageExec>() {
            return Some(StageRead { node: plan, stage, read: None });
        }
        let read = plan.downcast_ref::<AqeShuffleReadExec>()?;
        let node = read.children().into_iter().next()?;
        Some(StageRead { node, stage: read.stage(), read: Some(read) })
    }

    /// Whether adaptive reads may change the stage's partitions: not for a single partition.
    fn is_supported(&self) -> bool {
        !matches!(self.stage.exchange().partitioning(), ExchangePartitioning::Single)
    }
}

/// The bare shuffle stage `plan` is, if it is one.
fn bare_stage(plan: &Arc<dyn ExecutionPlan>) -> Option<&ShuffleQueryStageExec> {
    plan.downcast_ref::<ShuffleQueryStageExec>()
}

/// The input of a partition-local sort (what a sort-merge join's side sorts), else `plan`.
fn below_sort(plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    match plan.downcast_ref::<SortExec>() {
        Some(sort) if sort.preserve_partitioning() && sort.fetch().is_none() => sort.input(),
        _ => plan,
    }
}

/// Replaces the `index`-th node (in post-order, not counting below stages) that `is_target`
/// accepts with `replacement`, rebuilding the nodes above it.
fn replace_nth(
    plan: &Arc<dyn ExecutionPlan>,
    is_target: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
    index: usize,
    replacement: &Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    fn walk(
        plan: &Arc<dyn ExecutionPlan>,
        is_target: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
        seen: &mut usize,
        index: usize,
        replacement: &Arc<dyn ExecutionPlan>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if is_query_stage(plan) {
            return Ok(Arc::clone(plan));
        }
        let children = plan
            .children()
            .into_iter()
            .map(|child| walk(child, is_target, seen, index, replacement))
            .collect::<Result<Vec<_>>>()?;
        if is_target(plan) {
            *seen += 1;
            if *seen == index + 1 {
                return Ok(Arc::clone(replacement));
            }
        }
        replace_children_if_necessary(Arc::clone(plan), children)
    }
    walk(plan, is_target, &mut 0, index, replacement)
}

/// The nodes `is_target` accepts, in post-order, not counting below stages.
fn matching(
    plan: &Arc<dyn ExecutionPlan>,
    is_target: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
) -> Vec<Arc<dyn ExecutionPlan>> {
    fn walk(
        plan: &Arc<dyn ExecutionPlan>,
        is_target: &dyn Fn(&Arc<dyn ExecutionPlan>) -> bool,
        found: &mut Vec<Arc<dyn ExecutionPlan>>,
    ) {
        if is_query_stage(plan) {
            return;
        }
        plan.children().into_iter().for_each(|child| walk(child, is_target, found));
        if is_target(plan) {
            found.push(Arc::clone(plan));
        }
    }
    let mut found = Vec::new();
    walk(plan, is_target, &mut found);
    found
}
