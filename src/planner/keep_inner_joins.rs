//! DataFusion's `EliminateJoin`, except that an inner join stays inner. The rule turns `L ⋈ R`
//! into the semi join `L ⋉ R` when nothing above reads R's columns and R is unique on the join
//! keys, as a decorrelated scalar subquery's aggregate is (TPC-H's Q17). Spark's optimizer has
//! no such rewrite: its plan keeps the inner join, which adaptive execution may then broadcast
//! from either side, where a left semi join can only build on its right. What Spark does too
//! stays: an always-false inner join becomes an empty relation, and an outer join whose other
//! side is unused and unique on its keys goes (`EliminateOuterJoin`).
//!
//! Where we differ: the rule decides each join top-down, and below a join it made a semi join
//! it treats the right side as blind to duplicates, so it may also drop an outer join there
//! that is not unique on its keys. Such a join is not restored; its answer is the same.

use std::collections::HashSet;

use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{Column, JoinType, Result};
use datafusion::logical_expr::{Expr, Join, LogicalPlan, Projection};
use datafusion::optimizer::eliminate_join::EliminateJoin;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `EliminateJoin`, with its inner joins kept inner.
pub type KeepInnerJoins = Overridden<EliminateJoin, InnerJoinsStayInner>;

#[derive(Debug, Default)]
pub struct InnerJoinsStayInner;

impl Rewrite for InnerJoinsStayInner {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        let written_semi_joins = semi_joins(&plan);
        let rewritten = rule.rewrite(plan, config)?;
        if !rewritten.transformed {
            return Ok(rewritten);
        }
        rewritten.transform_data(|plan| {
            plan.transform_up_with_subqueries(|node| match node {
                LogicalPlan::Join(join) if is_semi(&join) && !written_semi_joins.contains(&condition_of(&join)) => {
                    inner_again(join).map(Transformed::yes)
                }
                node => Ok(Transformed::no(node)),
            })
        })
    }
}

fn is_semi(join: &Join) -> bool {
    matches!(join.join_type, JoinType::LeftSemi | JoinType::RightSemi)
}

/// What tells a semi join the plan already had (from `IN` or `EXISTS`, or set operations) from
/// one the rule made: its keys and condition, which the rule leaves as they were.
fn condition_of(join: &Join) -> String {
    format!("{:?} {:?} {:?}", join.join_type, join.on, join.filter)
}

fn semi_joins(plan: &LogicalPlan) -> HashSet<String> {
    let mut found = HashSet::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Join(join) = node
            && is_semi(join)
        {
            found.insert(condition_of(join));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// The inner join the semi join was, under a projection of the side the semi join kept.
fn inner_again(join: Join) -> Result<LogicalPlan> {
    let kept = match join.join_type {
        JoinType::LeftSemi => join.left.schema().clone(),
        _ => join.right.schema().clone(),
    };
    let inner = Join::try_new(
        join.left,
        join.right,
        join.on,
        join.filter,
        JoinType::Inner,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?;
    let columns = kept.iter().map(|(qualifier, field)| Expr::Column(Column::from((qualifier, field)))).collect();
    Ok(LogicalPlan::Projection(Projection::try_new(columns, LogicalPlan::Join(inner).into())?))
}
