//! Spark's generated code evaluates `a AND b` and `a OR b` lazily: `b` only for the rows `a`
//! leaves undecided, so a condition can guard what follows it (`x <> 0 AND 10 / x > 1`). Our
//! last step before exchanges are reused puts [`ShortCircuit`] in place of DataFusion's `AND`
//! and `OR` in filters and projections, which evaluate their right side over whole batches.
//!
//! Last, because the other rules read conditions as DataFusion builds them (conjuncts,
//! equalities, constant columns), and a filter built over a `ShortCircuit` derives none of
//! them. Join conditions and aggregate arguments keep DataFusion's evaluation.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use crate::exec::short_circuit::ShortCircuit;

pub fn short_circuit_evaluation(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if let Some(filter) = node.downcast_ref::<FilterExec>() {
            let predicate = lazy(Arc::clone(filter.predicate()))?;
            if !predicate.transformed {
                return Ok(Transformed::no(node));
            }
            let projection = filter.projection().as_ref().map(|p| p.iter().copied().collect());
            let rebuilt = FilterExecBuilder::new(predicate.data, Arc::clone(filter.input()))
                .apply_projection(projection)?
                .with_default_selectivity(filter.default_selectivity())
                .with_batch_size(filter.batch_size())
                .with_fetch(filter.fetch())
                .build()?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
            let mut changed = false;
            let mut exprs = Vec::with_capacity(projection.expr().len());
            for ProjectionExpr { expr, alias } in projection.expr() {
                let expr = lazy(Arc::clone(expr))?;
                changed |= expr.transformed;
                exprs.push(ProjectionExpr { expr: expr.data, alias: alias.clone() });
            }
            if !changed {
                return Ok(Transformed::no(node));
            }
            let rebuilt =
                ProjectionExec::try_new_with_schema_metadata(exprs, Arc::clone(projection.input()), &node.schema())?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        Ok(Transformed::no(node))
    })
    .map(|transformed| transformed.data)
}

/// `expr` with each `AND` and `OR` evaluated as Spark does.
fn lazy(expr: Arc<dyn PhysicalExpr>) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let Some(binary) = e.downcast_ref::<BinaryExpr>() else { return Ok(Transformed::no(e)) };
        match ShortCircuit::new(*binary.op(), Arc::clone(binary.left()), Arc::clone(binary.right())) {
            Some(lazy) => Ok(Transformed::yes(Arc::new(lazy) as Arc<dyn PhysicalExpr>)),
            None => Ok(Transformed::no(e)),
        }
    })
}
