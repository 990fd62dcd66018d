//! DataFusion's plumbing, which Spark has no operator for: what a plan is once it is looked
//! through, for the rules and EXPLAIN that name operators as Spark does.

use std::sync::Arc;

use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use super::apart::ApartExec;
use super::collect_in_order::CollectInOrderExec;
use super::runtime_filter::RuntimeFilterExec;

/// The input of plumbing Spark has no operator for: cooperative scheduling, one shuffle
/// partition at a time below a join that takes them apart, reading a global sort's ranges in
/// order, round-robin spreading of batches, batch coalescing, and the runtime filters adaptive
/// execution adds under Spark's plan.
pub fn plumbing_input(plan: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    if let Some(filter) = plan.downcast_ref::<RuntimeFilterExec>() {
        return Some(filter.input());
    }
    if let Some(cooperative) = plan.downcast_ref::<CooperativeExec>() {
        return Some(cooperative.input());
    }
    if let Some(apart) = plan.downcast_ref::<ApartExec>() {
        return Some(apart.input());
    }
    if let Some(collect) = plan.downcast_ref::<CollectInOrderExec>() {
        return Some(collect.input());
    }
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        return matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_)).then(|| repartition.input());
    }
    match plan.children().as_slice() {
        [child] if plan.name() == "CoalesceBatchesExec" => Some(*child),
        _ => None,
    }
}
