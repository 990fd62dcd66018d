//! The columns of an outer join's `USING (k)` as Spark resolves them: after `a FULL JOIN b
//! USING (k)` an unqualified `k` (and `*`'s `k`) is `coalesce(a.k, b.k)`, after `a RIGHT JOIN
//! b USING (k)` it is `b.k`. DataFusion takes `a.k` for both, which is NULL on every row that
//! only `b` has. So in a SELECT over one such join, the unqualified using columns of its list,
//! `WHERE`, `GROUP BY` and `HAVING` are written as Spark reads them, and `*` becomes those
//! columns followed by `a.* EXCLUDE (k), b.* EXCLUDE (k)`, Spark's order.
//!
//! Where we differ: only a SELECT over a single join of two named relations is rewritten; a
//! longer chain of joins, and `NATURAL` outer joins, keep DataFusion's reading.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectName, OrderBy, OrderByKind, Query,
    Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, VisitMut, VisitorMut,
};

use super::rewrite::{function_call, map_outside_subqueries, rewrite_selects};

/// Rewrites the SELECTs of `statement` over a FULL or RIGHT join with USING, and the ORDER BY of
/// a query over one.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut SortedByUsingColumns);
    rewrite_selects(statement, rewrite_select);
}

/// A query's `ORDER BY k` over such a join sorts by the join's `k` (which its SELECT lists as
/// `k`), unless the SELECT names something else `k`.
struct SortedByUsingColumns;

impl VisitorMut for SortedByUsingColumns {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_ref()
            && let Some(mut using) = UsingColumns::of(select)
            && let Some(OrderBy { kind: OrderByKind::Expressions(keys), .. }) = &mut query.order_by
        {
            using.columns.retain(|column| {
                !select.projection.iter().any(
                    |item| matches!(item, SelectItem::ExprWithAlias { alias, .. } if alias.value.eq_ignore_ascii_case(&column.value)),
                )
            });
            keys.iter_mut().for_each(|key| replace_using_columns(&mut key.expr, &using));
        }
        ControlFlow::Continue(())
    }
}

/// How an outer join's using column reads.
struct UsingColumns {
    columns: Vec<Ident>,
    left: Ident,
    right: Ident,
    full: bool,
}

impl UsingColumns {
    fn of(select: &Select) -> Option<Self> {
        let [from] = select.from.as_slice() else { return None };
        let [join] = from.joins.as_slice() else { return None };
        let (full, names) = match &join.join_operator {
            JoinOperator::FullOuter(JoinConstraint::Using(names)) => (true, names),
            JoinOperator::Right(JoinConstraint::Using(names))
            | JoinOperator::RightOuter(JoinConstraint::Using(names)) => (false, names),
            _ => return None,
        };
        let columns = names.iter().map(|name| match name.0.as_slice() {
            [part] => part.as_ident().cloned(),
            _ => None,
        });
        Some(UsingColumns {
            columns: columns.collect::<Option<_>>()?,
            left: qualifier(&from.relation)?,
            right: qualifier(&join.relation)?,
            full,
        })
    }

    fn is_using(&self, ident: &Ident) -> bool {
        self.columns.iter().any(|c| c.value.eq_ignore_ascii_case(&ident.value))
    }

    /// The column `ident` of the join, as Spark reads it.
    fn reading(&self, ident: &Ident) -> Expr {
        let side = |side: &Ident| Expr::CompoundIdentifier(vec![side.clone(), ident.clone()]);
        match self.full {
            true => function_call("coalesce", vec![side(&self.left), side(&self.right)]),
            false => side(&self.right),
        }
    }
}

/// The name a relation's columns are qualified by: its alias, or its table's name.
fn qualifier(relation: &TableFactor) -> Option<Ident> {
    match relation {
        TableFactor::Table { alias: Some(alias), .. } | TableFactor::Derived { alias: Some(alias), .. } => {
            Some(alias.name.clone())
        }
        TableFactor::Table { name, alias: None, .. } => name.0.last()?.as_ident().cloned(),
        _ => None,
    }
}

fn rewrite_select(select: &mut Select) {
    let Some(using) = UsingColumns::of(select) else { return };
    let mut projection = Vec::with_capacity(select.projection.len());
    for item in std::mem::take(&mut select.projection) {
        match item {
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) if using.is_using(&ident) => {
                projection.push(SelectItem::ExprWithAlias { expr: using.reading(&ident), alias: ident });
            }
            SelectItem::Wildcard(mut options) if options.opt_exclude.is_none() && options.opt_except.is_none() => {
                for column in &using.columns {
                    projection.push(SelectItem::ExprWithAlias { expr: using.reading(column), alias: column.clone() });
                }
                for side in [&using.left, &using.right] {
                    let names = using.columns.iter().map(|c| ObjectName::from(vec![c.clone()])).collect();
                    options.opt_exclude = Some(ExcludeSelectItem::Multiple(names));
                    let side = SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![side.clone()]));
                    projection.push(SelectItem::QualifiedWildcard(side, options.clone()));
                }
            }
            SelectItem::UnnamedExpr(mut expr) => {
                replace_using_columns(&mut expr, &using);
                projection.push(SelectItem::UnnamedExpr(expr));
            }
            SelectItem::ExprWithAlias { mut expr, alias } => {
                replace_using_columns(&mut expr, &using);
                projection.push(SelectItem::ExprWithAlias { expr, alias });
            }
            other => projection.push(other),
        }
    }
    select.projection = projection;
    for condition in select.selection.iter_mut().chain(select.having.iter_mut()) {
        replace_using_columns(condition, &using);
    }
    if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
        keys.iter_mut().for_each(|key| replace_using_columns(key, &using));
    }
}

/// `expr` with its unqualified using columns read as Spark reads them; not inside subqueries,
/// whose names are their own.
fn replace_using_columns(expr: &mut Expr, using: &UsingColumns) {
    map_outside_subqueries(expr, |expr| {
        if let Expr::Identifier(ident) = expr
            && using.is_using(ident)
        {
            *expr = Expr::Nested(Box::new(using.reading(ident)));
        }
    });
}
