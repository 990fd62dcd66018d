//! Spark's `ResolveGroupingAnalytics` (analyzer, `Analyzer.scala`): `ROLLUP`, `CUBE` and
//! `GROUPING SETS` become an `Expand` under the aggregate, keyed on the grouping columns plus
//! `spark_grouping_id`. DataFusion plans them as one aggregate that expands internally; we put
//! [`ExpandExec`] under its first (partial or single) aggregate, so the planner sees the
//! partitioning Spark sees: unknown, whatever the buckets below.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use crate::exec::expand::ExpandExec;

pub fn resolve_grouping_analytics(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
            return Ok(Transformed::no(node));
        };
        let first_phase = matches!(aggregate.mode(), AggregateMode::Partial | AggregateMode::Single);
        if !aggregate.group_expr().has_grouping_set() || !first_phase || aggregate.input().is::<ExpandExec>() {
            return Ok(Transformed::no(node));
        }
        let expand: Arc<dyn ExecutionPlan> = Arc::new(ExpandExec::new(Arc::clone(aggregate.input())));
        Ok(Transformed::yes(replace_children_if_necessary(node, vec![expand])?))
    })
    .map(|t| t.data)
}
