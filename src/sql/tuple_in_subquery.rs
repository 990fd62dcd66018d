//! `(a, b) IN (SELECT x, y …)`, which Spark plans (`RewritePredicateSubquery` makes it a semi
//! join on every column) and DataFusion refuses ("the subquery should only return one
//! column"), as `EXISTS (SELECT 1 FROM (SELECT x, y …) WHERE x = a AND y = b)`.
//!
//! The two differ where no row matches and a comparison is NULL: IN is NULL there, EXISTS
//! false. That is the same to a filter, so only conditions that decide by themselves whether a
//! row is kept are rewritten: the conjuncts of a `WHERE`, `HAVING` or `JOIN … ON` condition.
//! `NOT IN` and a tuple IN anywhere else are left as they are, and refused.

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, JoinConstraint, JoinOperator, Query, Select, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::rewrite::rewrite_selects;

/// Rewrites the tuple IN conditions of `statement` that filter rows.
pub fn rewrite(statement: &mut Statement) {
    rewrite_selects(statement, rewrite_select);
}

fn rewrite_select(select: &mut Select) {
    select.selection.iter_mut().chain(select.having.iter_mut()).for_each(rewrite_conjuncts);
    for join in select.from.iter_mut().flat_map(|from| from.joins.iter_mut()) {
        if let JoinOperator::Join(JoinConstraint::On(on))
        | JoinOperator::Inner(JoinConstraint::On(on))
        | JoinOperator::LeftSemi(JoinConstraint::On(on)) = &mut join.join_operator
        {
            rewrite_conjuncts(on);
        }
    }
}

fn rewrite_conjuncts(condition: &mut Expr) {
    match condition {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            rewrite_conjuncts(left);
            rewrite_conjuncts(right);
        }
        Expr::Nested(inner) => rewrite_conjuncts(inner),
        Expr::InSubquery { expr, subquery, negated: false } => {
            if let Expr::Tuple(values) = expr.as_ref()
                && let Some(exists) = as_exists(values, subquery)
            {
                *condition = exists;
            }
        }
        _ => {}
    }
}

/// `EXISTS` over `subquery`'s rows equal to `values`, column by column.
fn as_exists(values: &[Expr], subquery: &Query) -> Option<Expr> {
    let names: Vec<String> = (1..=values.len()).map(|i| format!("in_subquery_column_{i}")).collect();
    let equal = names
        .iter()
        .zip(values)
        .map(|(name, value)| format!("in_subquery.{name} = ({value})"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let text = format!("EXISTS (SELECT 1 FROM ({subquery}) AS in_subquery ({}) WHERE {equal})", names.join(", "));
    Parser::new(&GenericDialect {}).try_with_sql(&text).ok()?.parse_expr().ok()
}
