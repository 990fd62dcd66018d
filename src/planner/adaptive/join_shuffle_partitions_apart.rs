//! Joins coalesced shuffle partitions one by one where nothing needs the join's order: a
//! sort-merge join whose sides read the same coalesced partitions sorts and joins each
//! shuffle partition of them on its own (`SparkJoinExec::joining_shuffle_partitions_apart`).
//!
//! Spark has no such rule: its plan, which EXPLAIN shows unchanged, sorts each coalesced
//! partition whole. The rows are the same; only their order within a partition is not, so
//! the rule leaves alone a join whose order an operator above relies on (one that requires
//! an input order, through operators that keep their input's order).

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use super::is_query_stage;
use crate::exec::join::SparkJoinExec;
use crate::planner::ensure_requirements::required_ordering;

/// `plan`, a stage about to run; `order_needed`: whether its consumer relies on its order.
pub fn join_shuffle_partitions_apart(
    plan: Arc<dyn ExecutionPlan>,
    order_needed: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if is_query_stage(&plan) {
        return Ok(plan);
    }
    let maintained = plan.maintains_input_order();
    let children = plan
        .children()
        .into_iter()
        .enumerate()
        .map(|(i, child)| {
            let needed = required_ordering(plan.as_ref(), i).is_some()
                || order_needed && maintained.get(i).copied().unwrap_or(false);
            join_shuffle_partitions_apart(Arc::clone(child), needed)
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = replace_children_if_necessary(plan, children)?;
    if order_needed {
        return Ok(plan);
    }
    match plan.downcast_ref::<SparkJoinExec>().and_then(SparkJoinExec::joining_shuffle_partitions_apart) {
        Some(apart) => Ok(Arc::new(apart)),
        None => Ok(plan),
    }
}
