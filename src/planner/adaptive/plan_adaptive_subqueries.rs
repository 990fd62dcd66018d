//! Spark's `PlanAdaptiveSubqueries`: each uncorrelated scalar subquery of a query runs as an
//! adaptive plan of its own, beside the query's stages.
//!
//! Spark starts a subquery's job when the query is prepared, and a stage whose plan reads the
//! subquery's value waits for it when that stage runs (`waitForSubqueries`); stages that do
//! not read it run meanwhile. So here: the subqueries run as a task of their own from the
//! start, the stages of each round are the same as if they had run first, and only a stage
//! that evaluates a subquery's value, and the last stage, wait for them. Q11 of TPC-H scans
//! `partsupp` twice, once for its subquery: the two scans now run at once. The
//! `ScalarSubqueryExec` nodes go from the plan: the values their expressions read are set by
//! the task.

use std::sync::Arc;

use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::scalar_subquery::ScalarSubqueryExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::scalar_subquery::{ScalarSubqueryExec, ScalarSubqueryLink};
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, TryStreamExt};

use super::is_query_stage;

/// The subqueries' task, awaited by every stage that reads their values.
type Running = Shared<BoxFuture<'static, Result<(), Arc<DataFusionError>>>>;

/// The scalar subqueries of a query, running; done at once if it has none.
#[derive(Clone)]
pub struct Subqueries(Option<Running>);

impl Subqueries {
    /// Starts the uncorrelated scalar subqueries of `plan`, outermost first, each as the plan
    /// `adaptive` makes of it, and returns `plan` without its `ScalarSubqueryExec` nodes.
    pub fn start(
        plan: Arc<dyn ExecutionPlan>,
        adaptive: impl Fn(Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan>,
        context: &Arc<TaskContext>,
    ) -> Result<(Arc<dyn ExecutionPlan>, Subqueries)> {
        let mut nodes = Vec::new();
        scalar_subqueries(&plan, &mut nodes);
        if nodes.is_empty() {
            return Ok((plan, Subqueries(None)));
        }
        let mut values = Vec::new();
        for node in &nodes {
            let Some(exec) = node.downcast_ref::<ScalarSubqueryExec>() else { continue };
            let subqueries = exec
                .subqueries()
                .iter()
                .map(|link| ScalarSubqueryLink { plan: adaptive(Arc::clone(&link.plan)), index: link.index })
                .collect();
            // The node itself, over no rows: it sets the values its expressions read.
            let node = ScalarSubqueryExec::new(
                Arc::new(EmptyExec::new(exec.input().schema())),
                subqueries,
                exec.results().clone(),
            );
            values.push(node.execute(0, Arc::clone(context))?);
        }
        let task = SpawnedTask::spawn(async move {
            for mut rows in values {
                while rows.try_next().await?.is_some() {}
            }
            Ok(())
        });
        let done = async move {
            let ran = task.join().await.map_err(|e| DataFusionError::Execution(format!("a subquery failed: {e}")));
            ran.and_then(|ran| ran).map_err(Arc::new)
        };
        let plan = plan.transform_up(|node| match nodes.iter().any(|n| Arc::ptr_eq(n, &node)) {
            true => match node.downcast_ref::<ScalarSubqueryExec>() {
                Some(exec) => Ok(Transformed::yes(Arc::clone(exec.input()))),
                None => Ok(Transformed::no(node)),
            },
            false => Ok(Transformed::no(node)),
        })?;
        Ok((plan.data, Subqueries(Some(done.boxed().shared()))))
    }

    /// Waits until every subquery has set its value.
    pub async fn done(&self) -> Result<()> {
        match &self.0 {
            Some(running) => running.clone().await.map_err(DataFusionError::Shared),
            None => Ok(()),
        }
    }

    /// `run`, the materializing of the stage of `exchange`, after the subqueries if the stage
    /// evaluates a value of theirs.
    pub fn before(
        &self,
        exchange: &Arc<dyn ExecutionPlan>,
        run: BoxFuture<'static, Result<Arc<dyn ExecutionPlan>>>,
    ) -> Result<BoxFuture<'static, Result<Arc<dyn ExecutionPlan>>>> {
        if self.0.is_none() || !reads_subqueries(exchange)? {
            return Ok(run);
        }
        let subqueries = self.clone();
        Ok(Box::pin(async move {
            subqueries.done().await?;
            run.await
        }))
    }
}

/// The `ScalarSubqueryExec` nodes of `plan`, outermost first, not looking into subqueries
/// (which run as plans of their own).
fn scalar_subqueries(plan: &Arc<dyn ExecutionPlan>, found: &mut Vec<Arc<dyn ExecutionPlan>>) {
    match plan.downcast_ref::<ScalarSubqueryExec>() {
        Some(exec) => {
            found.push(Arc::clone(plan));
            scalar_subqueries(exec.input(), found);
        }
        None => plan.children().into_iter().for_each(|child| scalar_subqueries(child, found)),
    }
}

/// Whether an operator of `plan` above the stages that have run evaluates a subquery's value.
fn reads_subqueries(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    if is_query_stage(plan) {
        return Ok(false);
    }
    let mut reads = false;
    plan.apply_expressions(&mut |expr: &Arc<dyn PhysicalExpr>| {
        reads = expr.exists(|e| Ok(e.downcast_ref::<ScalarSubqueryExpr>().is_some()))?;
        Ok(if reads { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    if reads {
        return Ok(true);
    }
    for child in plan.children() {
        if reads_subqueries(child)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::logical_expr::physical_planning_context::{ScalarSubqueryResults, SubqueryIndex};
    use datafusion::physical_expr::expressions::{BinaryExpr, col};
    use datafusion::physical_plan::filter::FilterExec;
    use datafusion::physical_plan::projection::ProjectionExec;

    use super::*;

    #[test]
    fn only_a_stage_that_evaluates_a_subquery_value_waits_for_it() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let rows: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
        let value =
            ScalarSubqueryExpr::new(DataType::Int64, true, SubqueryIndex::new(0), ScalarSubqueryResults::new(1));
        let a = col("a", &schema).unwrap();
        let compared = Arc::new(BinaryExpr::new(Arc::clone(&a), Operator::Gt, Arc::new(value)));
        let filtered: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(compared, Arc::clone(&rows)).unwrap());
        let projected = |input| -> Arc<dyn ExecutionPlan> {
            Arc::new(ProjectionExec::try_new(vec![(Arc::clone(&a), "a".to_string())], input).unwrap())
        };
        assert!(reads_subqueries(&filtered).unwrap());
        assert!(reads_subqueries(&projected(Arc::clone(&filtered))).unwrap());
        assert!(!reads_subqueries(&projected(rows)).unwrap());
    }
}
