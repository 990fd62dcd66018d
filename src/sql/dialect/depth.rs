//! Bounds on how deep a statement nests. Its AST is cloned, visited and dropped by recursion
//! (sqlparser's derived `Clone`, `Visit` and `Drop`), a stack frame or more per level, and
//! sqlparser's recursion limit does not cover what it builds in loops: each operator of
//! `a + b + c ...`, `x::t::t ...` or `q UNION q UNION ...` wraps everything before it one
//! level deeper. A few kilobytes of such SQL overflowed a worker thread's stack, which aborts
//! the whole server. Past these bounds a statement is refused with 54001, as PostgreSQL
//! refuses one that exceeds its `max_stack_depth`; the server's worker threads have stacks
//! that hold a statement at the bounds (`WORKER_STACK_BYTES`, in the server module).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Query, Visit, Visitor};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::ParserError;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::statement::BucketSqlStatement;

/// Most levels of nested expressions and subqueries in one statement: `SELECT 1 + 1` is three
/// (the query, the sum, its operands).
pub const MAX_EXPRESSION_DEPTH: usize = 1000;

/// Most set operations (`UNION`, `EXCEPT`, `INTERSECT`, `MINUS`) in one query string: each
/// nests the query before it one level deeper.
pub const MAX_SET_OPERATIONS: usize = 1000;

/// Refuses an operator whose left operand is already [`MAX_EXPRESSION_DEPTH`] deep, so that
/// an operator chain stops growing while it is parsed. A chain grows along the operand's
/// leftmost path, which is walked first (without recursion through operators and casts, the
/// links of long chains), and the visit stops after as many expressions as the bound, so each
/// operator costs at most that much.
pub(super) fn check_operand(left: &Expr) -> Result<(), ParserError> {
    let mut depth = 0;
    let mut bottom = left;
    while let Expr::BinaryOp { left: first, .. } | Expr::Cast { expr: first, .. } | Expr::Nested(first) = bottom {
        depth += 1;
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(ParserError::RecursionLimitExceeded);
        }
        bottom = first;
    }
    let mut probe = DepthProbe { depth, budget: MAX_EXPRESSION_DEPTH + 1 - depth, too_deep: false };
    let _ = bottom.visit(&mut probe);
    probe.result()
}

/// Refuses a statement nesting deeper than [`MAX_EXPRESSION_DEPTH`] anywhere: operands of
/// operators nest through sqlparser's own recursion too, up to its limit on each chain.
pub(super) fn check_statement(statement: &BucketSqlStatement) -> Result<(), ParserError> {
    let mut probe = DepthProbe { depth: 0, budget: usize::MAX, too_deep: false };
    let _ = match statement {
        BucketSqlStatement::Sql(statement) => statement.visit(&mut probe),
        BucketSqlStatement::ShowPartitions { partition_spec, .. }
        | BucketSqlStatement::ShowBuckets { partition_spec, .. }
        | BucketSqlStatement::AnalyzeTable { partition_spec, .. } => {
            partition_spec.iter().try_for_each(|(_, value)| value.visit(&mut probe))
        }
        BucketSqlStatement::SetTableProperties { properties, .. } => {
            properties.iter().try_for_each(|property| property.visit(&mut probe))
        }
        BucketSqlStatement::AddColumns { columns, .. } => {
            columns.iter().try_for_each(|column| column.visit(&mut probe))
        }
        BucketSqlStatement::SetVariable { .. }
        | BucketSqlStatement::ShowVariable { .. }
        | BucketSqlStatement::Reset { .. }
        | BucketSqlStatement::RefreshTable { .. }
        | BucketSqlStatement::UnsetTableProperties { .. }
        | BucketSqlStatement::DescribeColumn { .. }
        | BucketSqlStatement::SetLocation { .. } => ControlFlow::Continue(()),
    };
    probe.result()
}

/// Refuses a query string with more than [`MAX_SET_OPERATIONS`] set operators, before it is
/// parsed: sqlparser has no hook in the loop that chains them.
pub(super) fn check_set_operations(tokens: &[TokenWithSpan]) -> Result<(), ParserError> {
    let set_operators = tokens
        .iter()
        .filter(|t| {
            matches!(&t.token, Token::Word(w)
                if matches!(w.keyword, Keyword::UNION | Keyword::EXCEPT | Keyword::INTERSECT | Keyword::MINUS))
        })
        .count();
    if set_operators > MAX_SET_OPERATIONS { Err(ParserError::RecursionLimitExceeded) } else { Ok(()) }
}

/// Visits expressions and queries depth-first, stopping at the first level past the bound or
/// when its budget of expressions is spent.
struct DepthProbe {
    depth: usize,
    budget: usize,
    too_deep: bool,
}

impl DepthProbe {
    fn enter(&mut self) -> ControlFlow<()> {
        self.depth += 1;
        self.too_deep = self.depth > MAX_EXPRESSION_DEPTH;
        if self.too_deep || self.budget == 0 {
            return ControlFlow::Break(());
        }
        self.budget -= 1;
        ControlFlow::Continue(())
    }

    fn leave(&mut self) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn result(&self) -> Result<(), ParserError> {
        if self.too_deep { Err(ParserError::RecursionLimitExceeded) } else { Ok(()) }
    }
}

impl Visitor for DepthProbe {
    type Break = ();

    fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
        self.enter()
    }

    fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
        self.leave()
    }

    fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.enter()
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.leave()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::parse_sql;

    fn refused(sql: &str) -> bool {
        matches!(parse_sql(sql), Err(ParserError::RecursionLimitExceeded))
    }

    #[test]
    fn operator_chains_stop_at_the_bound() {
        // n operators: the query, n sums, the innermost operands.
        let chain = |n: usize| format!("SELECT {}1", "1 + ".repeat(n));
        assert!(!refused(&chain(MAX_EXPRESSION_DEPTH - 2)));
        assert!(refused(&chain(MAX_EXPRESSION_DEPTH - 1)));
        // Far past it the chain stops growing as soon as it is too deep.
        assert!(refused(&chain(20_000)));
        let casts = format!("SELECT 1{}", "::INT".repeat(MAX_EXPRESSION_DEPTH + 1));
        assert!(refused(&casts));
    }

    #[test]
    fn chains_nested_in_parentheses_add_up() {
        // A chain as the first operand of another lengthens its leftmost path.
        let chain = "1 + ".repeat(MAX_EXPRESSION_DEPTH / 4);
        let nested = |levels: usize| (0..levels).fold("1".to_string(), |inner, _| format!("({inner}) + {chain}1"));
        assert!(!refused(&format!("SELECT {}", nested(3))));
        assert!(refused(&format!("SELECT {}", nested(5))));
        // Behind a list too long for the operator's look, the statement's own check finds it.
        let list = vec!["1"; MAX_EXPRESSION_DEPTH + 100].join(", ");
        let hidden = |levels: usize| {
            (0..levels).fold("1".to_string(), |inner, _| format!("(1 IN ({list}) + ({inner})) + {chain}1"))
        };
        assert!(!refused(&format!("SELECT {}", hidden(3))));
        assert!(refused(&format!("SELECT {}", hidden(5))));
    }

    #[test]
    fn wide_statements_are_not_deep() {
        let values = format!("INSERT INTO t VALUES {}", vec!["(1 + 1, -2, '3'::DATE)"; 10_000].join(", "));
        assert!(!refused(&values));
        let list = format!("SELECT * FROM t WHERE a IN ({})", vec!["1"; 10_000].join(", "));
        assert!(!refused(&list));
    }

    #[test]
    fn set_operations_are_counted() {
        let unions = |n: usize| format!("SELECT 1{}", " UNION ALL SELECT 1".repeat(n));
        assert!(!refused(&unions(MAX_SET_OPERATIONS)));
        assert!(refused(&unions(MAX_SET_OPERATIONS + 1)));
        assert!(refused(&unions(20_000)));
    }
}
