//! Spark's `grouping` and `grouping_id` (`ResolveGroupingAnalytics` in `Analyzer.scala`), as
//! DataFusion's `grouping`, which takes several columns and returns their bits as one INT.
//!
//! - `grouping(c)` is a TINYINT in Spark: 1 where `c` is aggregated away, else 0.
//! - `grouping_id(c1, …, cn)` is a BIGINT whose bits are `grouping(c1)` … `grouping(cn)`, the
//!   first the highest, which is what DataFusion's `grouping(c1, …, cn)` computes;
//!   `grouping_id()` takes every column of the `GROUP BY`, in the order they first appear.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{DataType, Expr, GroupByExpr, Select, Statement, visit_expressions_mut};

use super::rewrite::{arguments, cast, function_call, is_function, rewrite_selects};

/// Spark's types and `grouping_id` for the grouping functions of `statement`.
pub fn rewrite(statement: &mut Statement) {
    rewrite_selects(statement, rewrite_select);
}

fn rewrite_select(select: &mut Select) {
    let keys = grouping_keys(&select.group_by);
    let mut spark_typed = |e: &mut Expr| {
        if let Expr::Function(function) = e {
            if is_function(function, "grouping_id") {
                let args = arguments(function).unwrap_or_default();
                let columns = if args.is_empty() { keys.clone() } else { args };
                *e = cast(function_call("grouping", columns), DataType::BigInt(None));
            } else if is_function(function, "grouping") {
                let args = arguments(function).unwrap_or_default();
                *e = cast(function_call("grouping", args), DataType::TinyInt(None));
            }
        }
        ControlFlow::<()>::Continue(())
    };
    let _ = visit_expressions_mut(&mut select.projection, &mut spark_typed);
    let _ = visit_expressions_mut(&mut select.having, &mut spark_typed);
}

/// Every expression of the `GROUP BY`, once each, in the order they first appear.
fn grouping_keys(group_by: &GroupByExpr) -> Vec<Expr> {
    let GroupByExpr::Expressions(exprs, _) = group_by else { return Vec::new() };
    let mut keys: Vec<Expr> = Vec::new();
    let mut add = |e: &Expr| {
        if !keys.contains(e) {
            keys.push(e.clone());
        }
    };
    for expr in exprs {
        match expr {
            Expr::Rollup(sets) | Expr::Cube(sets) | Expr::GroupingSets(sets) => {
                sets.iter().flatten().for_each(&mut add)
            }
            Expr::Tuple(items) => items.iter().for_each(&mut add),
            other => add(other),
        }
    }
    keys
}
