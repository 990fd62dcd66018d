//! Spark's generators in a query: `LATERAL VIEW [OUTER] gen(args) v [AS c, …]` after a FROM,
//! and one generator call in a select list (`SELECT id, explode(a) AS x FROM t`). Both become a
//! lateral table function joined to the FROM, `CROSS JOIN LATERAL gen(args) AS v(c, …)` (the
//! `_outer` form for OUTER), which the planner's `Generate` rule makes Spark's `Generate`. A
//! select-list generator's columns take its place in the list: `explode(m) AS (k, v)` names
//! both of a map's, and an unaliased one keeps Spark's names (`col`, `key`, `value`, `pos`).
//!
//! Several generators in one SELECT make every combination of their rows, as Spark's do. In a
//! SELECT that groups (GROUP BY, HAVING, or a generator over `collect_list`), the grouping moves
//! into a subquery and the generators run on its rows, as Spark's run after the aggregate.
//!
//! Where we differ: a grouping SELECT's `ORDER BY` can name only what it selects.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, Join, JoinConstraint,
    JoinOperator, ObjectName, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableAlias,
    TableAliasColumnDef, TableFactor, TableWithJoins, Visit, Visitor, WildcardAdditionalOptions,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::dialect::DEFAULT_COLUMNS;
use super::rewrite::{column_name, is_function, rewrite_selects};
use crate::error::SqlError;
use crate::exec::generate::Generator;

/// The name a select-list generator's columns are qualified by.
const GENERATED: &str = "__generated";

pub fn rewrite(statement: &mut Statement) -> Result<(), SqlError> {
    let mut outcome = Ok(());
    rewrite_selects(statement, |select| {
        if outcome.is_ok() {
            outcome = rewrite_select(select);
        }
    });
    outcome
}

fn rewrite_select(select: &mut Select) -> Result<(), SqlError> {
    for view in std::mem::take(&mut select.lateral_views) {
        let Expr::Function(function) = &view.lateral_view else {
            return Err(not_a_generator(&view.lateral_view.to_string()));
        };
        let generator = generator_of(function).ok_or_else(|| not_a_generator(&function.to_string()))?;
        let name = if view.outer && !generator.name().ends_with("_outer") {
            format!("{}_outer", generator.name())
        } else {
            generator.name()
        };
        let alias = view.lateral_view_name.0.last().and_then(|part| part.as_ident()).cloned();
        let alias = alias.ok_or_else(|| SqlError::syntax(format!("LATERAL VIEW needs a name: {view}")))?;
        let mut columns = view.lateral_col_alias;
        columns.retain(|c| c.value != DEFAULT_COLUMNS);
        let relation = generator_relation(&name, function, alias, columns, true);
        join_to_from(select, relation);
    }
    let generators: Vec<usize> = select
        .projection
        .iter()
        .enumerate()
        .filter(|(_, item)| matches!(item_expr(item), Some(Expr::Function(f)) if generator_of(f).is_some()))
        .map(|(i, _)| i)
        .collect();
    if let Some(nested) = nested_generator(select, &generators) {
        return Err(SqlError::new(
            "42K0E",
            format!(
                "[UNSUPPORTED_GENERATOR.NESTED_IN_EXPRESSIONS] The generator is not supported: nested in expressions \"{nested}\"."
            ),
        ));
    }
    if generators.is_empty() {
        return Ok(());
    }
    if groups(select, &generators) {
        generate_from_groups(select, &generators)?;
    }
    for (n, &index) in generators.iter().enumerate() {
        let view = format!("{GENERATED}_{n}");
        let item = std::mem::replace(
            &mut select.projection[index],
            SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![Ident::new(&view)])),
                WildcardAdditionalOptions::default(),
            ),
        );
        let (expr, columns) = match item {
            SelectItem::UnnamedExpr(expr) => (expr, Vec::new()),
            SelectItem::ExprWithAlias { expr, alias } => (expr, vec![alias]),
            SelectItem::ExprWithAliases { expr, aliases } => (expr, aliases),
            _ => continue,
        };
        if let Expr::Function(function) = &expr
            && let Some(generator) = generator_of(function)
        {
            let lateral = !select.from.is_empty();
            let relation = generator_relation(&generator.name(), function, Ident::new(view), columns, lateral);
            join_to_from(select, relation);
        }
    }
    Ok(())
}

/// Whether `select` groups its rows before its generators run: it has GROUP BY or HAVING, or a
/// generator's argument collects a group into an array.
fn groups(select: &Select, generators: &[usize]) -> bool {
    struct FindCollect(bool);
    impl Visitor for FindCollect {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = expr
                && COLLECTING_AGGREGATES.iter().any(|name| is_function(f, name))
            {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(keys, _) if keys.is_empty());
    grouped
        || select.having.is_some()
        || generators.iter().any(|&i| {
            let mut find = FindCollect(false);
            let _ = select.projection[i].visit(&mut find);
            find.0
        })
}

/// Aggregates that collect a group's values into an array, which a generator may spread again.
const COLLECTING_AGGREGATES: [&str; 3] = ["collect_list", "collect_set", "array_agg"];

/// Moves a grouping `select` into a subquery, `__grouped`, whose columns are its other items and
/// its generators' arguments; `select` then lists those columns and calls its generators on
/// them, so they run on the grouped rows as Spark's do.
fn generate_from_groups(select: &mut Select, generators: &[usize]) -> Result<(), SqlError> {
    const GROUPED: &str = "__grouped";
    let template = Parser::parse_sql(&GenericDialect {}, "SELECT * FROM (SELECT 1) AS __grouped")?;
    let Some(Statement::Query(mut outer)) = template.into_iter().next() else {
        return Err(SqlError::internal("a query template did not parse"));
    };
    let SetExpr::Select(outer_select) = outer.body.as_mut() else {
        return Err(SqlError::internal("a query template is not a SELECT"));
    };
    let mut inner = select.clone();
    inner.distinct = None;
    let grouped_column = |name: String| Expr::CompoundIdentifier(vec![Ident::new(GROUPED), Ident::new(name)]);
    let mut inner_items = Vec::new();
    let mut outer_items = Vec::new();
    for (i, item) in select.projection.iter().enumerate() {
        let generator = generators.contains(&i);
        match (item, item_expr(item)) {
            (_, Some(Expr::Function(function))) if generator => {
                let mut call = function.clone();
                if let FunctionArguments::List(list) = &mut call.args {
                    for (j, arg) in list.args.iter_mut().enumerate() {
                        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) = arg {
                            let name = format!("__generator_{i}_argument_{j}");
                            inner_items
                                .push(SelectItem::ExprWithAlias { expr: value.clone(), alias: Ident::new(&name) });
                            *value = grouped_column(name);
                        }
                    }
                }
                outer_items.push(match item {
                    SelectItem::ExprWithAlias { alias, .. } => {
                        SelectItem::ExprWithAlias { expr: Expr::Function(call), alias: alias.clone() }
                    }
                    SelectItem::ExprWithAliases { aliases, .. } => {
                        SelectItem::ExprWithAliases { expr: Expr::Function(call), aliases: aliases.clone() }
                    }
                    _ => SelectItem::UnnamedExpr(Expr::Function(call)),
                });
            }
            (_, Some(expr)) => {
                let name = match item {
                    SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                    _ => column_name(expr).map_or_else(|| expr.to_string(), |c| c.value.clone()),
                };
                let inner_name = format!("__item_{i}");
                inner_items.push(SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::new(&inner_name) });
                outer_items
                    .push(SelectItem::ExprWithAlias { expr: grouped_column(inner_name), alias: Ident::new(name) });
            }
            _ => {
                return Err(SqlError::feature_not_supported(
                    "a generator beside * in a SELECT that groups; name the columns instead",
                ));
            }
        }
    }
    inner.projection = inner_items;
    if let Some(TableFactor::Derived { subquery, .. }) = outer_select.from.first_mut().map(|f| &mut f.relation) {
        *subquery.body = SetExpr::Select(Box::new(inner));
    }
    outer_select.projection = outer_items;
    outer_select.distinct = select.distinct.take();
    *select = (**outer_select).clone();
    Ok(())
}

fn item_expr(item: &SelectItem) -> Option<&Expr> {
    match item {
        SelectItem::UnnamedExpr(expr)
        | SelectItem::ExprWithAlias { expr, .. }
        | SelectItem::ExprWithAliases { expr, .. } => Some(expr),
        _ => None,
    }
}

/// The generator `function` calls, if it is a plain call of one.
fn generator_of(function: &Function) -> Option<Generator> {
    let [name] = function.name.0.as_slice() else { return None };
    let generator = Generator::named(&name.as_ident()?.value)?;
    (function.over.is_none() && matches!(function.args, FunctionArguments::List(_))).then_some(generator)
}

/// A generator call inside an expression of the select list (not a whole item).
fn nested_generator(select: &Select, whole_items: &[usize]) -> Option<String> {
    struct FindGenerator(Option<String>);
    impl Visitor for FindGenerator {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = expr
                && generator_of(f).is_some()
            {
                self.0 = Some(expr.to_string());
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    select.projection.iter().enumerate().find_map(|(i, item)| {
        let expr = item_expr(item)?;
        let mut find = FindGenerator(None);
        if whole_items.contains(&i) {
            let Expr::Function(function) = expr else { return None };
            let _ = function.args.visit(&mut find);
        } else {
            let _ = expr.visit(&mut find);
        }
        find.0.map(|inner| format!("{expr}: {inner}"))
    })
}

fn generator_relation(
    name: &str,
    function: &Function,
    alias: Ident,
    columns: Vec<Ident>,
    lateral: bool,
) -> TableFactor {
    let args = match &function.args {
        FunctionArguments::List(list) => list.args.clone(),
        _ => Vec::new(),
    };
    TableFactor::Function {
        lateral,
        name: ObjectName::from(vec![Ident::new(name)]),
        args,
        with_ordinality: false,
        alias: Some(TableAlias {
            explicit: true,
            name: alias,
            columns: columns.into_iter().map(|c| TableAliasColumnDef { name: c, data_type: None }).collect(),
            at: None,
        }),
    }
}

/// Joins `relation` to everything the FROM lists, which becomes one chain of joins.
fn join_to_from(select: &mut Select, relation: TableFactor) {
    let mut from = std::mem::take(&mut select.from).into_iter();
    let Some(mut first) = from.next() else {
        select.from.push(TableWithJoins { relation, joins: Vec::new() });
        return;
    };
    for more in from {
        first.joins.push(cross_join(more.relation));
        first.joins.extend(more.joins);
    }
    first.joins.push(cross_join(relation));
    select.from = vec![first];
}

fn cross_join(relation: TableFactor) -> Join {
    Join { relation, global: false, join_operator: JoinOperator::CrossJoin(JoinConstraint::None) }
}

fn not_a_generator(expr: &str) -> SqlError {
    SqlError::new(
        "42K0E",
        format!(
            "[UNSUPPORTED_GENERATOR.NOT_GENERATOR] The generator is not supported: {expr} is expected to be a generator."
        ),
    )
}
