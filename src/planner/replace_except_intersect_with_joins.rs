//! Spark's `ReplaceExceptWithAntiJoin` and `ReplaceIntersectWithSemiJoin`: `l EXCEPT r` is
//! `Distinct(l LEFT ANTI JOIN r ON l.c <=> r.c …)`, `l INTERSECT r` the same with a semi
//! join: the distinct comes after the join, so rows move once to be joined on the
//! null-safe keys and once more to be deduplicated.
//!
//! DataFusion builds the distinct under the join, on the left input; this moves it above. The
//! rows are the same either way: a row of `l` is kept by the join whatever its duplicates do.

use std::sync::Arc;

use datafusion::common::NullEquality;
use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::logical_expr::{Aggregate, Join, JoinType, LogicalPlan};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct ReplaceExceptIntersectWithJoins;

impl OptimizerRule for ReplaceExceptIntersectWithJoins {
    fn name(&self) -> &str {
        "replace_except_intersect_with_joins"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(join) = plan else { return Ok(Transformed::no(plan)) };
        let Some(distinct) = distinct_input(&join) else { return Ok(Transformed::no(LogicalPlan::Join(join))) };
        let (group_by, input) = (distinct.group_expr.clone(), Arc::clone(&distinct.input));
        let joined = Join::try_new(
            input,
            join.right,
            join.on,
            join.filter,
            join.join_type,
            join.join_constraint,
            join.null_equality,
            join.null_aware,
        )?;
        let aggregate = Aggregate::try_new(Arc::new(LogicalPlan::Join(joined)), group_by, Vec::new())?;
        Ok(Transformed::yes(LogicalPlan::Aggregate(aggregate)))
    }
}

/// The distinct DataFusion put on the left of an EXCEPT's or INTERSECT's join: a semi or anti
/// join on null-safe keys over an aggregate by every column of its input with no functions.
fn distinct_input(join: &Join) -> Option<&Aggregate> {
    if !matches!(join.join_type, JoinType::LeftAnti | JoinType::LeftSemi)
        || join.null_equality != NullEquality::NullEqualsNull
        || join.filter.is_some()
    {
        return None;
    }
    let LogicalPlan::Aggregate(aggregate) = join.left.as_ref() else { return None };
    let every_column = aggregate.group_expr.len() == aggregate.input.schema().fields().len()
        && aggregate.group_expr.iter().zip(aggregate.input.schema().columns()).all(|(e, c)| e.try_as_col() == Some(&c));
    (aggregate.aggr_expr.is_empty() && every_column).then_some(aggregate)
}
