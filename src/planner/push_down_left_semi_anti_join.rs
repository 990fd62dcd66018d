//! Spark's `PushLeftSemiLeftAntiThroughJoin` and the projection case of its
//! `PushDownLeftSemiAntiJoin`: a left semi or anti join, what `IN`, `EXISTS` and `NOT EXISTS`
//! subqueries become, moves below a join to the side its condition reads (of an inner join
//! either side, of a left outer join the left, of a right outer join the right), through a
//! projection of columns on its way, so that it drops rows before they are joined. TPC-H
//! Q21's `EXISTS` and `NOT EXISTS` on `lineitem l1` then run on l1's scan, as in Spark's plan.
//!
//! Where we differ: Spark also pushes these joins through aggregates (where the join can be
//! broadcast), windows, unions and a few other operators; and a null-aware anti join
//! (`NOT IN`), which Spark pushes as any other, stays where it is.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::error::Result;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, Projection};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct PushDownLeftSemiAntiJoin;

impl OptimizerRule for PushDownLeftSemiAntiJoin {
    fn name(&self) -> &str {
        "push_down_left_semi_anti_join"
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        // Top down: a join pushed one level is met again as a child, and pushed further. A
        // semi join standing on another is met before that one moves, so passes repeat until
        // none moves, as Spark's operator optimization repeats to a fixed point (at most
        // `spark.sql.optimizer.maxIterations`, 100, times).
        let (mut plan, mut moved) = (plan, false);
        for _ in 0..100 {
            let pass = plan.transform_down(|node| match node {
                LogicalPlan::Join(join) if pushable(&join) => push_down(join),
                other => Ok(Transformed::no(other)),
            })?;
            plan = pass.data;
            if !pass.transformed {
                break;
            }
            moved = true;
        }
        Ok(if moved { Transformed::yes(plan) } else { Transformed::no(plan) })
    }
}

fn pushable(join: &Join) -> bool {
    matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti) && !join.null_aware
}

/// Where a semi or anti join goes below the join that is its left input.
enum Direction {
    Left,
    Right,
}

fn push_down(join: Join) -> Result<Transformed<LogicalPlan>> {
    match join.left.as_ref() {
        LogicalPlan::Join(child) => {
            let Some(direction) = direction(&join, child) else {
                return Ok(Transformed::no(LogicalPlan::Join(join)));
            };
            let (child_left, child_right) = (Arc::clone(&child.left), Arc::clone(&child.right));
            let pushed = |input| {
                Join::try_new(
                    input,
                    Arc::clone(&join.right),
                    join.on.clone(),
                    join.filter.clone(),
                    join.join_type,
                    join.join_constraint,
                    join.null_equality,
                    false,
                )
                .map(|join| Arc::new(LogicalPlan::Join(join)))
            };
            let (left, right) = match direction {
                Direction::Left => (pushed(child_left)?, child_right),
                Direction::Right => (child_left, pushed(child_right)?),
            };
            let child = Join::try_new(
                left,
                right,
                child.on.clone(),
                child.filter.clone(),
                child.join_type,
                child.join_constraint,
                child.null_equality,
                child.null_aware,
            )?;
            Ok(Transformed::yes(LogicalPlan::Join(child)))
        }
        LogicalPlan::Projection(projection) => through_projection(&join, projection),
        _ => Ok(Transformed::no(LogicalPlan::Join(join))),
    }
}

/// Spark's `pushTo`: the side of `child` (the semi join's left input) that every conjunct of
/// the semi join's condition reads, besides the subquery's columns; for a condition of none,
/// the side the child join keeps all rows of.
fn direction(join: &Join, child: &Join) -> Option<Direction> {
    let conjuncts = conjuncts(join);
    let (left, right, subquery) = (child.left.schema(), child.right.schema(), join.right.schema());
    let allowed = (
        matches!(child.join_type, JoinType::Inner | JoinType::Left),
        matches!(child.join_type, JoinType::Inner | JoinType::Right),
    );
    if conjuncts.is_empty() {
        return match child.join_type {
            JoinType::Inner | JoinType::Left => Some(Direction::Left),
            JoinType::Right => Some(Direction::Right),
            _ => None,
        };
    }
    let (on_left, rest): (Vec<&Expr>, Vec<&Expr>) =
        conjuncts.iter().partition(|c| reads_only(c, &[left.as_ref(), subquery.as_ref()]));
    let (on_right, common): (Vec<&Expr>, Vec<&Expr>) =
        rest.iter().partition(|c| reads_only(c, &[right.as_ref(), subquery.as_ref()]));
    if rest.is_empty() && !on_left.is_empty() && allowed.0 {
        Some(Direction::Left)
    } else if on_left.is_empty() && !on_right.is_empty() && common.is_empty() && allowed.1 {
        Some(Direction::Right)
    } else {
        None
    }
}

/// The semi join's condition as conjuncts: each equated pair, then the filter's parts.
fn conjuncts(join: &Join) -> Vec<Expr> {
    let pairs = join.on.iter().map(|(left, right)| left.clone().eq(right.clone()));
    let filter = join.filter.iter().flat_map(|filter| split_conjunction(filter).into_iter().cloned());
    pairs.chain(filter).collect()
}

fn reads_only(expr: &Expr, schemas: &[&DFSchema]) -> bool {
    expr.column_refs().iter().all(|column| schemas.iter().any(|schema| schema.has_column(column)))
}

/// The semi join below a projection of columns (and of literals), where it goes further down
/// from there: its condition then reads the columns the projection's outputs are.
fn through_projection(join: &Join, projection: &Projection) -> Result<Transformed<LogicalPlan>> {
    let unchanged = || Ok(Transformed::no(LogicalPlan::Join(join.clone())));
    let mut outputs = HashMap::new();
    for (i, expr) in projection.expr.iter().enumerate() {
        let source = match expr {
            Expr::Alias(alias) => alias.expr.as_ref(),
            other => other,
        };
        if !matches!(source, Expr::Column(_) | Expr::Literal(..)) {
            return unchanged();
        }
        let (qualifier, field) = projection.schema.qualified_field(i);
        outputs.insert(Column::from((qualifier, field)), source.clone());
    }
    let below = |expr: &Expr| -> Result<Expr> {
        expr.clone()
            .transform(|e| match &e {
                Expr::Column(column) => match outputs.get(column) {
                    Some(source) => Ok(Transformed::yes(source.clone())),
                    None => Ok(Transformed::no(e)),
                },
                _ => Ok(Transformed::no(e)),
            })
            .map(|t| t.data)
    };
    // Spark's `canPushThroughCondition`: a subquery column that the projection's input also
    // has (a self-join) would be read ambiguously below it.
    let input = projection.input.schema();
    let ambiguous = conjuncts(join)
        .iter()
        .flat_map(|c| c.column_refs().into_iter().cloned().collect::<Vec<_>>())
        .any(|column| join.right.schema().has_column(&column) && input.has_column(&column));
    if ambiguous {
        return unchanged();
    }
    let on = join.on.iter().map(|(left, right)| Ok((below(left)?, right.clone()))).collect::<Result<Vec<_>>>()?;
    // A key the projection made a literal is no key to join on.
    if on.iter().any(|(left, _)| left.column_refs().is_empty()) {
        return unchanged();
    }
    let filter = join.filter.as_ref().map(below).transpose()?;
    let pushed = Join::try_new(
        Arc::clone(&projection.input),
        Arc::clone(&join.right),
        on,
        filter,
        join.join_type,
        join.join_constraint,
        join.null_equality,
        false,
    )?;
    // Only on its way further down: Spark's column pruning would put a projection back under
    // a semi join left standing on the projection's input.
    let below = push_down(pushed)?;
    if !below.transformed {
        return unchanged();
    }
    let projection = Projection::try_new(projection.expr.clone(), Arc::new(below.data))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}
