//! Makes every operator that combines inputs (joins, unions) yield to the runtime now and
//! then. Spark has no such rule: its tasks are threads the JVM can interrupt. A DataFusion
//! operator is a future, stopped only where it yields, and DataFusion's `EnsureCooperative`
//! makes only the leaves yield (a scan that reads files). A join can emit batch after batch
//! from rows it already holds (a nested-loop join over a cartesian product) without polling a
//! leaf, so nothing above it yields: a `statement_timeout` or a cancel could not stop it, and
//! it would hold its thread from every other query. Wrapped in `CooperativeExec`, each of its
//! batches spends from the task's budget, and the task yields when the budget is spent.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;

pub fn cooperative_joins(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if node.children().len() < 2 {
            return Ok(Transformed::no(node));
        }
        Ok(Transformed::yes(Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>))
    })
    .map(|transformed| transformed.data)
}
