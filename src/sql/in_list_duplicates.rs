//! The duplicate literals of an `IN` list, dropped as the statement is parsed. Spark's
//! `OptimizeIn` keeps one of each item (`ExpressionSet(list)`), and DataFusion's simplifier
//! does too, but only after the SQL planner, the analyzer and type coercion have gone over
//! every item: `k IN (7, 7, …)` with 100 000 items took seconds to plan, past a
//! `statement_timeout`, where its answer takes none. Dropping them here changes no answer:
//! an item equal to an earlier one matches the same rows and is NULL for the same ones.
//!
//! Where we differ: only items written alike are one (`7` and `7.0` stay two, as their types
//! differ before coercion); Spark compares them once coerced.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Statement, UnaryOperator, VisitMut, VisitorMut};

/// Drops the repeated literals of every `IN (…)` list in `statement`.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut DropDuplicateItems);
}

struct DropDuplicateItems;

impl VisitorMut for DropDuplicateItems {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::InList { list, .. } = expr {
            let mut seen = HashSet::new();
            list.retain(|item| !is_literal(item) || seen.insert(item.clone()));
        }
        ControlFlow::Continue(())
    }
}

/// A literal, or a signed one (`-7`), whose text alone says its value and type.
fn is_literal(item: &Expr) -> bool {
    match item {
        Expr::Value(_) => true,
        Expr::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr } => {
            matches!(expr.as_ref(), Expr::Value(_))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::rewritten_by;

    fn rewritten(sql: &str) -> String {
        rewritten_by(sql, rewrite)
    }

    #[test]
    fn keeps_the_first_of_each_literal_in_order() {
        assert_eq!(
            rewritten("SELECT * FROM t WHERE k IN (7, 3, 7, -1, 3, -1, +2, NULL, NULL, 'a', 'a', 7.0)"),
            "SELECT * FROM t WHERE k IN (7, 3, -1, +2, NULL, 'a', 7.0)"
        );
    }

    #[test]
    fn keeps_repeated_expressions_and_lists_in_subqueries_and_negations() {
        assert_eq!(
            rewritten(
                "SELECT k NOT IN (1, 1, rand(), rand(), k, k) FROM t WHERE v IN (SELECT v FROM u WHERE v IN ('x', 'x'))"
            ),
            "SELECT k NOT IN (1, rand(), rand(), k, k) FROM t WHERE v IN (SELECT v FROM u WHERE v IN ('x'))"
        );
    }
}
