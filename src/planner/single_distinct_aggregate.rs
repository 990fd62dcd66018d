//! Spark plans an aggregate with one distinct argument (`count(DISTINCT b), sum(c)`) in two
//! levels: first grouped by the keys and `b` with the other aggregates partial, then by the keys
//! alone (`AggUtils.planAggregateWithOneDistinct`). DataFusion's `SingleDistinctToGroupBy`
//! rewrites the logical plan into the same two levels, summing the inner sums in the outer
//! aggregate; but a `sum` over `DECIMAL(p, s)` widens to `DECIMAL(p + 10, s)`, so the outer sum
//! comes out ten digits wider than the aggregate it replaces, while the plan above (a HAVING
//! comparison, a union) was typed for the original. We run the rewrite and cast every output
//! whose type changed back to the type Spark gives it.
//!
//! Spark keeps the inner level in two aggregates (partial, then merge) even where its input
//! is already distributed by the keys and the distinct argument (a table bucketed by them), so
//! `split_inner_aggregates` undoes DataFusion's combining of that pair into one.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Projection, cast};
use datafusion::optimizer::single_distinct_to_groupby::SingleDistinctToGroupBy;
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};

#[derive(Debug, Default)]
pub struct SingleDistinctAggregate(SingleDistinctToGroupBy);

impl OptimizerRule for SingleDistinctAggregate {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let before = plan.schema().clone();
        let rewritten = self.0.rewrite(plan, config)?;
        let LogicalPlan::Projection(projection) = &rewritten.data else { return Ok(rewritten) };
        if !rewritten.transformed || projection.schema.fields().len() != before.fields().len() {
            return Ok(rewritten);
        }
        let input_schema = projection.input.schema();
        let mut changed = false;
        let mut exprs = Vec::with_capacity(projection.expr.len());
        for (expr, field) in projection.expr.iter().zip(before.fields()) {
            if expr.get_type(input_schema)? == *field.data_type() {
                exprs.push(expr.clone());
                continue;
            }
            changed = true;
            let (qualifier, name) = expr.qualified_name();
            let unaliased = match expr {
                Expr::Alias(alias) => alias.expr.as_ref().clone(),
                other => other.clone(),
            };
            exprs.push(cast(unaliased, field.data_type().clone()).alias_qualified(qualifier, name));
        }
        if !changed {
            return Ok(rewritten);
        }
        let projection = Projection::try_new(exprs, projection.input.clone())?;
        Ok(Transformed::yes(LogicalPlan::Projection(projection)))
    }
}

/// The name DataFusion's rewrite gives the distinct argument among the inner level's keys.
pub const SINGLE_DISTINCT_ALIAS: &str = "alias1";

/// The inner level of a rewritten single-distinct aggregate that runs as one aggregate
/// (partial and final combined) as Spark's partial and merge aggregates.
pub fn split_inner_aggregates(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(single) = node.downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let final_mode = match single.mode() {
            AggregateMode::Single => AggregateMode::Final,
            AggregateMode::SinglePartitioned => AggregateMode::FinalPartitioned,
            _ => return Ok(Transformed::no(node)),
        };
        if !single.group_expr().expr().iter().any(|(_, name)| name == SINGLE_DISTINCT_ALIAS) {
            return Ok(Transformed::no(node));
        }
        let partial = Arc::new(AggregateExec::try_new(
            AggregateMode::Partial,
            single.group_expr().clone(),
            single.aggr_expr().to_vec(),
            single.filter_expr().to_vec(),
            Arc::clone(single.input()),
            single.input_schema(),
        )?);
        let merged = AggregateExec::try_new(
            final_mode,
            partial.group_expr().as_final(),
            partial.aggr_expr().to_vec(),
            single.filter_expr().to_vec(),
            partial,
            single.input_schema(),
        )?;
        Ok(Transformed::yes(Arc::new(merged) as Arc<dyn ExecutionPlan>))
    })
    .map(|t| t.data)
}
