//! PostgreSQL's limits on grouping sets, `54000` past them: a `CUBE` of at most 12 elements
//! and at most 4096 grouping sets in one `GROUP BY`. Spark has neither and expands
//! `CUBE` of 30 columns into a billion sets until memory runs out; DataFusion enumerates
//! every subset of a `CUBE` before its own check of the count. So a 200-byte statement
//! asked for gigabytes. Checked on the parsed statement, before DataFusion plans it.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, GroupByExpr, Query, SetExpr, Statement, Visit, Visitor};

use crate::error::SqlError;

const MAX_CUBE_ELEMENTS: usize = 12;
const MAX_GROUPING_SETS: u64 = 4096;

/// Refuses a statement any of whose `GROUP BY` clauses is past the limits.
pub fn check(statement: &Statement) -> Result<(), SqlError> {
    match statement.visit(&mut GroupingLimits) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct GroupingLimits;

impl Visitor for GroupingLimits {
    type Break = SqlError;

    // Every query, subqueries included, is visited; each checks the SELECTs of its own body.
    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<SqlError> {
        match check_body(&query.body) {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => ControlFlow::Break(error),
        }
    }
}

fn check_body(body: &SetExpr) -> Result<(), SqlError> {
    match body {
        SetExpr::Select(select) => match &select.group_by {
            GroupByExpr::Expressions(items, _) => {
                let sets =
                    items.iter().try_fold(1u64, |sets, item| grouping_sets(item).map(|n| sets.saturating_mul(n)))?;
                if sets > MAX_GROUPING_SETS {
                    return Err(too_many(format!("too many grouping sets present (maximum {MAX_GROUPING_SETS})")));
                }
                Ok(())
            }
            GroupByExpr::All(_) => Ok(()),
        },
        SetExpr::SetOperation { left, right, .. } => {
            check_body(left)?;
            check_body(right)
        }
        _ => Ok(()),
    }
}

/// How many grouping sets one `GROUP BY` item stands for.
fn grouping_sets(item: &Expr) -> Result<u64, SqlError> {
    Ok(match item {
        Expr::Cube(elements) if elements.len() > MAX_CUBE_ELEMENTS => {
            return Err(too_many(format!("CUBE is limited to {MAX_CUBE_ELEMENTS} elements")));
        }
        Expr::Cube(elements) => 1 << elements.len(),
        Expr::Rollup(elements) => elements.len() as u64 + 1,
        Expr::GroupingSets(sets) => sets.len() as u64,
        _ => 1,
    })
}

fn too_many(message: String) -> SqlError {
    SqlError::new("54000", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::parse_one;

    fn code(sql: &str) -> Option<&'static str> {
        check(&parse_one(sql)).err().map(|e| e.code)
    }

    #[test]
    fn cubes_and_products_of_sets_are_bounded() {
        let cube = |n: usize| (0..n).map(|i| format!("c{i}")).collect::<Vec<_>>().join(", ");
        assert_eq!(code(&format!("SELECT count(*) FROM t GROUP BY CUBE({})", cube(12))), None);
        assert_eq!(code(&format!("SELECT count(*) FROM t GROUP BY CUBE({})", cube(13))), Some("54000"));
        let product = format!("SELECT 1 FROM t GROUP BY CUBE({}), ROLLUP(a, b)", cube(11));
        assert_eq!(code(&product), Some("54000"), "2048 × 3 sets");
        let nested = format!("SELECT * FROM (SELECT 1 FROM t GROUP BY CUBE({})) x", cube(30));
        assert_eq!(code(&nested), Some("54000"));
        assert_eq!(code("SELECT a FROM t GROUP BY GROUPING SETS ((a), (b), ()) UNION SELECT 1"), None);
    }
}
