//! DataFusion names an expression by its text with every cast left out (`sum(CAST(x AS INT))`
//! is `sum(x)`), and refuses two aggregates or group keys of one name (apache/datafusion#18975):
//! `SELECT sum(x), sum(CAST(x AS INT))` and `GROUP BY x, CAST(x AS BIGINT)` fail there, where
//! Spark answers. So where a SELECT holds such a pair, the casts of each expression but the one
//! without any are wrapped in a `coalesce` of one argument, two for the next one, and so on:
//! `coalesce(x)` is `x`, the optimizer takes it away again, and the names differ. Select items
//! keep the names they were given first, from their text.
//!
//! Where we differ: window functions are left as they are. Two that the optimizer makes one
//! (`sum(i) OVER w` of an INT, which it casts to BIGINT, beside `sum(CAST(i AS BIGINT)) OVER
//! w`) would then fail to plan, so `sum(x) OVER w, sum(CAST(x AS DOUBLE)) OVER w` still fails.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, Ident, OrderBy, OrderByKind, Query, Select, SelectItem, SetExpr, Statement, VisitMut,
    VisitorMut, visit_expressions, visit_expressions_mut,
};

use super::rewrite::{for_each_select, function_call};

/// Sets apart, in every SELECT of `statement`, the expressions DataFusion would name alike.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut SetApart);
}

struct SetApart;

impl VisitorMut for SetApart {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        match query.body.as_mut() {
            SetExpr::Select(select) => set_apart(select, query.order_by.as_mut()),
            // A set operation's ORDER BY names its output columns.
            body => for_each_select(body, &mut |select| set_apart(select, None)),
        }
        ControlFlow::Continue(())
    }
}

fn set_apart(select: &mut Select, mut order_by: Option<&mut OrderBy>) {
    let depths = wrap_depths(select, order_by.as_deref_mut());
    if depths.is_empty() {
        return;
    }
    let mut wrap = Wrap { depths: &depths, set_aside: Vec::new() };
    for_each_part(select, order_by.as_deref_mut(), |expr| {
        let _ = expr.visit(&mut wrap);
    });
    let set_aside = wrap.set_aside;
    for_each_part(select, order_by, |expr| put_back(expr, &set_aside));
}

/// The parts of a SELECT that name aggregates and group keys: its select list, `GROUP BY`,
/// `HAVING`, `QUALIFY`, and the query's `ORDER BY`.
fn for_each_part(select: &mut Select, order_by: Option<&mut OrderBy>, mut f: impl FnMut(&mut Expr)) {
    for item in &mut select.projection {
        if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item {
            f(expr);
        }
    }
    if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
        keys.iter_mut().for_each(&mut f);
    }
    select.having.iter_mut().chain(select.qualify.iter_mut()).for_each(&mut f);
    if let Some(OrderBy { kind: OrderByKind::Expressions(keys), .. }) = order_by {
        keys.iter_mut().for_each(|key| f(&mut key.expr));
    }
}

/// For each expression of a SELECT DataFusion would name like another one, the depth of
/// `coalesce` its casts get: 0 for the one without casts, then 1, 2, … in the order met.
fn wrap_depths(select: &mut Select, order_by: Option<&mut OrderBy>) -> HashMap<String, usize> {
    let keys = match &select.group_by {
        GroupByExpr::Expressions(keys, _) => keys.clone(),
        GroupByExpr::All(_) => Vec::new(),
    };
    let mut named: Vec<Expr> = keys;
    for_each_part(select, order_by, |expr| {
        let _ = visit_expressions(expr, |e| {
            if matches!(e, Expr::Function(function) if function.over.is_none()) {
                named.push(e.clone());
            }
            ControlFlow::<()>::Continue(())
        });
    });
    let mut alike: HashMap<String, Vec<String>> = HashMap::new();
    for expr in &named {
        let texts = alike.entry(without_casts(expr).to_string()).or_default();
        let text = expr.to_string();
        if !texts.contains(&text) {
            texts.push(text);
        }
    }
    let mut depths = HashMap::new();
    for (name, mut texts) in alike.into_iter().filter(|(_, texts)| texts.len() > 1) {
        // The one without casts, if any, keeps them: there is nothing in it to wrap.
        texts.sort_by_key(|text| *text != name);
        depths.extend(texts.into_iter().enumerate().skip(1).map(|(depth, text)| (text, depth)));
    }
    depths
}

fn without_casts(expr: &Expr) -> Expr {
    let mut stripped = expr.clone();
    let _ = visit_expressions_mut(&mut stripped, |e| {
        if let Expr::Cast { expr: inner, .. } = e {
            *e = inner.as_ref().clone();
        }
        ControlFlow::<()>::Continue(())
    });
    stripped
}

/// Wraps the casts of each expression whose text has a depth, outermost first: each such
/// expression is set aside behind a placeholder as it is met, so that nothing in it is met
/// again, then put back.
struct Wrap<'a> {
    depths: &'a HashMap<String, usize>,
    set_aside: Vec<Expr>,
}

impl VisitorMut for Wrap<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(&depth) = self.depths.get(&expr.to_string()) {
            let mut wrapped = Expr::Identifier(Ident::new(format!("{PLACEHOLDER}{}", self.set_aside.len())));
            std::mem::swap(expr, &mut wrapped);
            let _ = visit_expressions_mut(&mut wrapped, |e| {
                if matches!(e, Expr::Cast { .. }) {
                    for _ in 0..depth {
                        *e = function_call("coalesce", vec![e.clone()]);
                    }
                }
                ControlFlow::<()>::Continue(())
            });
            self.set_aside.push(wrapped);
        }
        ControlFlow::Continue(())
    }
}

/// What stands for an expression set aside while the others are wrapped.
const PLACEHOLDER: &str = "__set_apart_";

fn put_back(expr: &mut Expr, set_aside: &[Expr]) {
    let _ = visit_expressions_mut(expr, |e| {
        if let Expr::Identifier(ident) = e
            && let Some(index) = ident.value.strip_prefix(PLACEHOLDER).and_then(|i| i.parse::<usize>().ok())
            && let Some(original) = set_aside.get(index)
        {
            *e = original.clone();
        }
        ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::rewritten_by;

    fn rewritten(sql: &str) -> String {
        rewritten_by(sql, rewrite)
    }

    #[test]
    fn aggregates_alike_but_for_casts_are_set_apart_wherever_they_appear() {
        assert_eq!(
            rewritten(
                "SELECT sum(CAST(x AS INT)), sum(x), sum(CAST(x AS DOUBLE)) FROM t \
                 HAVING sum(CAST(x AS INT)) > 0 ORDER BY sum(CAST(x AS DOUBLE))"
            ),
            "SELECT sum(coalesce(CAST(x AS INT))), sum(x), sum(coalesce(coalesce(CAST(x AS DOUBLE)))) FROM t \
             HAVING sum(coalesce(CAST(x AS INT))) > 0 ORDER BY sum(coalesce(coalesce(CAST(x AS DOUBLE))))"
        );
    }

    #[test]
    fn group_keys_alike_are_set_apart_and_window_functions_left_alone() {
        assert_eq!(
            rewritten("SELECT x, CAST(x AS BIGINT), count(*) FROM t GROUP BY x, CAST(x AS BIGINT)"),
            "SELECT x, coalesce(CAST(x AS BIGINT)), count(*) FROM t GROUP BY x, coalesce(CAST(x AS BIGINT))"
        );
        let windows = "SELECT max(v) OVER (), max(CAST(v AS DOUBLE)) OVER () FROM t";
        assert_eq!(rewritten(windows), windows);
    }

    #[test]
    fn each_branch_of_a_union_is_set_apart_on_its_own() {
        assert_eq!(
            rewritten("SELECT p, CAST(p AS DOUBLE) FROM t GROUP BY p, CAST(p AS DOUBLE) UNION ALL SELECT p, q FROM u"),
            "SELECT p, coalesce(CAST(p AS DOUBLE)) FROM t GROUP BY p, coalesce(CAST(p AS DOUBLE)) \
             UNION ALL SELECT p, q FROM u"
        );
    }

    #[test]
    fn expressions_named_apart_stay_as_written() {
        let sql = "SELECT sum(x), sum(CAST(y AS INT)), CAST(x AS INT), x FROM t GROUP BY x";
        assert_eq!(rewritten(sql), sql);
    }
}
