//! Rewrites the idioms of PostgreSQL clients' catalog queries into SQL DataFusion plans
//! with the same result.
//!
//! - `COLLATE x` is dropped (strings compare bytewise, the `C` collation), and
//!   `OPERATOR(pg_catalog.~)` becomes `~`.
//! - `pg_catalog.f(..)` calls `f(..)`, in FROM too; a bare `pg_class` means
//!   `pg_catalog.pg_class`, as `pg_catalog` comes first on PostgreSQL's search path;
//!   `current_user`, `session_user`, `current_schema`... without parentheses are calls.
//! - Casts to `regclass`/`regtype`/`regnamespace`: a name (literal or parameter) becomes its
//!   OID (`to_regclass('t')`), an OID shown as text becomes the name (`regclassout(oid)`);
//!   `'f'::regproc` is the function's name, as `pg_type.typinput` holds names. `oid`,
//!   `name`, `"char"` and `pg_catalog.int2`-style casts become the types the server uses.
//! - `array(SELECT x ...)` becomes `(SELECT array_agg(x ...) ...)`.
//! - A correlated scalar subquery over catalog relations, which DataFusion plans only when
//!   it is aggregated and correlated by equalities, becomes a LEFT JOIN of the outer query
//!   with the subquery's relations, its correlated predicates as the join condition.
//! - A SELECT that reads an always-empty relation (`pg_policy`, `pg_index`,
//!   `pg_publication`, ...) without aggregating returns no rows, whatever its select list and
//!   WHERE clause compute: those become NULLs and `false`, so that what DataFusion cannot
//!   plan there (psql's `array(... = any(pol.polroles))`, pgjdbc's `_pg_expandarray`,
//!   SQLAlchemy's `generate_subscripts`) goes; such a scalar subquery is NULL.
//! - `LIKE .. ESCAPE '/'` (SQLAlchemy) is written with backslash escapes, the only ones
//!   DataFusion reads.
//! - A select list that repeats a name (`SELECT pubname, NULL, NULL`, `SELECT db.oid, db.*`),
//!   which PostgreSQL allows and DataFusion does not, gets unique names.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, BinaryOperator, DataType, ExcludeSelectItem, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, Join, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart, OrderByKind,
    Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, Value, Visit,
    VisitMut, Visitor, VisitorMut, visit_expressions, visit_expressions_mut,
};
use datafusion::sql::sqlparser::parser::Parser;

use super::oids::{INFORMATION_SCHEMA, PG_CATALOG};
use super::views::{PG_CATALOG_VIEWS, always_empty};
use crate::sql::dialect::BucketSqlDialect;
use crate::sql::rewrite::{for_each_select, function_call, map_outside_subqueries};

pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut CatalogIdioms { subqueries: 0, item_texts: Vec::new() });
}

struct CatalogIdioms {
    /// Subqueries turned into joins so far, to name each join uniquely.
    subqueries: usize,
    /// For each query being visited, the SQL text of each select list item before rewriting.
    item_texts: Vec<Vec<Vec<String>>>,
}

impl VisitorMut for CatalogIdioms {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut texts = Vec::new();
        for_each_select(&mut query.body, &mut |select| {
            texts.push(select.projection.iter().map(ToString::to_string).collect());
            if returns_nothing(select) {
                null_computed_columns(select);
                select.selection = Some(Expr::Value(Value::Boolean(false).into()));
            }
            self.decorrelate(select);
        });
        self.item_texts.push(texts);
        ControlFlow::Continue(())
    }

    /// A rewritten select list item keeps the name its SQL text gave it.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut texts = self.item_texts.pop().unwrap_or_default().into_iter();
        for_each_select(&mut query.body, &mut |select| {
            let originals = texts.next().unwrap_or_default();
            for (item, original) in select.projection.iter_mut().zip(originals) {
                if let SelectItem::UnnamedExpr(expr) = item
                    && expr.to_string() != original
                {
                    *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::with_quote('"', original) };
                }
            }
            name_duplicates(select);
        });
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<()> {
        if let [ObjectNamePart::Identifier(ident)] = name.0.as_slice()
            && ident.quote_style.is_none()
            && PG_CATALOG_VIEWS.iter().any(|v| v.name == ident.value)
        {
            name.0.insert(0, ObjectNamePart::Identifier(Ident::new(PG_CATALOG)));
        }
        ControlFlow::Continue(())
    }

    /// `pg_catalog.generate_series(..)` in FROM is the table function `generate_series`.
    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args: Some(_), .. } = factor
            && name.0.len() == 2
            && name.0[0].to_string().eq_ignore_ascii_case(PG_CATALOG)
        {
            name.0.remove(0);
        }
        ControlFlow::Continue(())
    }

    /// `x::regclass::text` is seen whole here, before its inner cast is rewritten.
    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Cast { expr: inner, data_type, .. } = expr
            && matches!(target(data_type), Some(Target::Sql(DataType::Text)))
            && let Expr::Cast { expr: value, data_type: reg, .. } = inner.as_mut()
            && let (Some(Target::Reg(kind)), false) = (target(reg), is_name(value))
        {
            *expr = function_call(kind.output(), vec![(**value).clone()]);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Collate { expr: inner, .. } => *expr = (**inner).clone(),
            Expr::Subquery(query) if always_null(query) => *expr = Expr::Value(Value::Null.into()),
            Expr::BinaryOp { op, .. } => {
                if let BinaryOperator::PGCustomBinaryOperator(parts) = op
                    && let Some(standard) = standard_operator(parts)
                {
                    *op = standard;
                }
            }
            Expr::Identifier(ident) if ident.quote_style.is_none() && is_keyword_function(&ident.value) => {
                *expr = function_call(&ident.value.to_lowercase(), Vec::new());
            }
            Expr::Function(function) => {
                if let [ObjectNamePart::Identifier(schema), _] = function.name.0.as_slice()
                    && schema.value.eq_ignore_ascii_case(PG_CATALOG)
                {
                    function.name.0.remove(0);
                }
                let name = function.name.to_string().to_lowercase();
                match &function.args {
                    FunctionArguments::None if is_keyword_function(&name) => *expr = function_call(&name, Vec::new()),
                    FunctionArguments::Subquery(query) if name == "array" => {
                        if let Some(aggregated) = array_subquery(query) {
                            *expr = aggregated;
                        }
                    }
                    _ => {}
                }
            }
            Expr::Like { pattern, escape_char, .. } | Expr::ILike { pattern, escape_char, .. } => {
                if let Some(escape) = escape_char.as_ref().and_then(|e| match &e.value {
                    Value::SingleQuotedString(c) if c != "\\" => c.chars().next(),
                    _ => None,
                }) {
                    **pattern = backslash_escaped(pattern, escape);
                    *escape_char = None;
                }
            }
            Expr::Cast { expr: value, data_type, .. } => match target(data_type) {
                Some(Target::Proc) => {
                    if let Expr::Value(v) = value.as_mut()
                        && let Value::SingleQuotedString(name) = &mut v.value
                    {
                        *name = name.strip_prefix("pg_catalog.").unwrap_or(name).to_string();
                    }
                    *expr = (**value).clone();
                }
                Some(Target::Reg(kind)) if is_name(value) => {
                    *expr = function_call(kind.input(), vec![(**value).clone()])
                }
                Some(Target::Reg(kind)) => *expr = function_call(kind.output(), vec![(**value).clone()]),
                Some(Target::Sql(sql_type)) => *data_type = sql_type,
                None => {}
            },
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn string(value: &str) -> Expr {
    Expr::Value(Value::SingleQuotedString(value.to_string()).into())
}

/// A string expression made of literals, as one string.
fn literal_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(s.clone()),
            _ => None,
        },
        Expr::BinaryOp { left, op: BinaryOperator::StringConcat, right } => {
            Some(literal_text(left)? + &literal_text(right)?)
        }
        Expr::Nested(inner) => literal_text(inner),
        _ => None,
    }
}

/// A LIKE pattern written with `ESCAPE 'c'` (SQLAlchemy's `'/'`) in the backslash escapes
/// DataFusion reads. A pattern of literals is translated here; any other is translated as it
/// is evaluated, by `replace` calls that keep an escaped escape character (`cc`) literal.
fn backslash_escaped(pattern: &Expr, escape: char) -> Expr {
    if let Some(text) = literal_text(pattern) {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                c if c == escape => match chars.next() {
                    Some(next @ ('%' | '_')) => {
                        out.push('\\');
                        out.push(next);
                    }
                    Some('\\') => out.push_str("\\\\"),
                    Some(next) => out.push(next),
                    None => {}
                },
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        return string(&out);
    }
    let (escape, placeholder) = (escape.to_string(), "\u{1}");
    let replace = |expr: Expr, from: &str, to: &str| function_call("replace", vec![expr, string(from), string(to)]);
    let doubled = replace(pattern.clone(), "\\", "\\\\");
    let kept = replace(doubled, &escape.repeat(2), placeholder);
    replace(replace(kept, &escape, "\\"), placeholder, &escape)
}

/// PostgreSQL allows a select list to repeat a column name (`SELECT pubname, NULL, NULL`),
/// DataFusion does not: a repeated unnamed expression gets its position appended, and a
/// column listed beside its relation's wildcard (`SELECT db.oid, db.*`) is left out of the
/// wildcard.
fn name_duplicates(select: &mut Select) {
    let explicit: Vec<(String, ObjectName)> = select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) if parts.len() == 2 => {
                Some((parts[0].value.clone(), ObjectName::from(vec![parts[1].clone()])))
            }
            _ => None,
        })
        .collect();
    for item in &mut select.projection {
        if let SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(relation), options) = item {
            let excluded: Vec<ObjectName> =
                explicit.iter().filter(|(q, _)| relation.to_string() == *q).map(|(_, c)| c.clone()).collect();
            if !excluded.is_empty() && options.opt_exclude.is_none() {
                options.opt_exclude = Some(ExcludeSelectItem::Multiple(excluded));
            }
        }
    }
    let mut seen = BTreeSet::new();
    for (i, item) in select.projection.iter_mut().enumerate() {
        let Some(name) = output_name(item) else { continue };
        if let SelectItem::UnnamedExpr(expr) = item
            && !seen.insert(name.clone())
        {
            let expr = expr.clone();
            *item = SelectItem::ExprWithAlias { expr, alias: Ident::with_quote('"', format!("{name}_{}", i + 1)) };
        } else {
            seen.insert(name);
        }
    }
}

/// The name a select item gives its column, `None` for a wildcard.
fn output_name(item: &SelectItem) -> Option<String> {
    Some(match item {
        SelectItem::UnnamedExpr(Expr::Identifier(ident)) => ident.value.clone(),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
            parts.last().map(|p| p.value.clone()).unwrap_or_default()
        }
        SelectItem::UnnamedExpr(other) => other.to_string(),
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        _ => return None,
    })
}

/// The first name, in lower case as a table's columns are named, that a query's select list
/// gives two columns:
/// what `name_duplicates` would rename apart, and what a table's columns may not repeat.
pub fn repeated_name(query: &Query) -> Option<String> {
    let mut body = query.body.as_ref();
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    let SetExpr::Select(select) = body else {
        return None;
    };
    let mut seen = BTreeSet::new();
    select
        .projection
        .iter()
        .filter_map(output_name)
        .map(|name| name.to_lowercase())
        .find(|name| !seen.insert(name.clone()))
}

/// `current_user` and friends, which SQL writes without parentheses.
fn is_keyword_function(name: &str) -> bool {
    ["current_user", "session_user", "current_role", "current_schema", "current_catalog"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

fn standard_operator(parts: &[String]) -> Option<BinaryOperator> {
    let (op, schema) = parts.split_last()?;
    if !(schema.is_empty() || (schema.len() == 1 && schema[0].eq_ignore_ascii_case(PG_CATALOG))) {
        return None;
    }
    Some(match op.as_str() {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "~~" => BinaryOperator::PGLikeMatch,
        "!~~" => BinaryOperator::PGNotLikeMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "||" => BinaryOperator::StringConcat,
        _ => return None,
    })
}

#[derive(Clone, Copy)]
enum RegKind {
    Class,
    Type,
    Namespace,
}

impl RegKind {
    /// The function turning a name into the OID.
    fn input(self) -> &'static str {
        match self {
            RegKind::Class => "to_regclass",
            RegKind::Type => "to_regtype",
            RegKind::Namespace => "to_regnamespace",
        }
    }

    /// The function turning the OID into the name.
    fn output(self) -> &'static str {
        match self {
            RegKind::Class => "regclassout",
            RegKind::Type => "regtypeout",
            RegKind::Namespace => "regnamespaceout",
        }
    }
}

enum Target {
    Reg(RegKind),
    /// `regproc`: functions are known by name (`pg_type.typinput`), so a cast to it keeps the
    /// name, unqualified.
    Proc,
    Sql(DataType),
}

/// What a cast to a PostgreSQL catalog type means here.
fn target(data_type: &DataType) -> Option<Target> {
    match data_type {
        DataType::Regclass => Some(Target::Reg(RegKind::Class)),
        DataType::Text => Some(Target::Sql(DataType::Text)),
        DataType::Custom(name, modifiers) if modifiers.is_empty() => {
            let parts: Vec<String> = name.0.iter().map(|p| p.to_string().trim_matches('"').to_lowercase()).collect();
            let base = match parts.as_slice() {
                [base] => base,
                [schema, base] if schema == PG_CATALOG => base,
                _ => return None,
            };
            Some(match base.as_str() {
                "regclass" => Target::Reg(RegKind::Class),
                "regtype" => Target::Reg(RegKind::Type),
                "regnamespace" => Target::Reg(RegKind::Namespace),
                "regproc" | "regprocedure" => Target::Proc,
                "text" | "name" | "char" | "varchar" => Target::Sql(DataType::Text),
                "oid" | "int4" | "regrole" => Target::Sql(DataType::Int(None)),
                "int2" => Target::Sql(DataType::SmallInt(None)),
                "int8" => Target::Sql(DataType::BigInt(None)),
                "bool" => Target::Sql(DataType::Boolean),
                "float4" => Target::Sql(DataType::Real),
                "float8" => Target::Sql(DataType::DoublePrecision),
                _ => return None,
            })
        }
        DataType::Array(ArrayElemTypeDef::SquareBracket(element, size)) => match target(element)? {
            Target::Sql(element) => {
                Some(Target::Sql(DataType::Array(ArrayElemTypeDef::SquareBracket(Box::new(element), *size))))
            }
            Target::Reg(_) | Target::Proc => None,
        },
        _ => None,
    }
}

/// A name to look up: a string literal or a bound parameter (an OID otherwise).
fn is_name(expr: &Expr) -> bool {
    matches!(expr, Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_) | Value::Placeholder(_)))
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&BucketSqlDialect).try_with_sql(sql).ok()?.parse_expr().ok()
}

fn parse_select(sql: &str) -> Option<Select> {
    let query = Parser::new(&BucketSqlDialect).try_with_sql(sql).ok()?.parse_query().ok()?;
    match *query.body {
        SetExpr::Select(select) => Some(*select),
        _ => None,
    }
}

/// `array(SELECT x FROM .. ORDER BY ..)` as `(SELECT array_agg(x ORDER BY ..) FROM ..)`.
/// psql's `array(select 'toast.' || x from unnest(tc.reloptions) x)` lists the options of a
/// table's TOAST table, which bucketsql tables never have: it is the empty array.
fn array_subquery(query: &Query) -> Option<Expr> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if let [from] = select.from.as_slice()
        && let TableFactor::Table { name, args: Some(args), .. } = &from.relation
        && name.0.last().is_some_and(|n| n.to_string().eq_ignore_ascii_case("unnest"))
        && matches!(args.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::CompoundIdentifier(column)))]
            if column.last().is_some_and(|c| c.value == "reloptions"))
        && select.selection.is_none()
    {
        return parse_expr("CAST(make_array() AS TEXT[])");
    }
    let [SelectItem::UnnamedExpr(item) | SelectItem::ExprWithAlias { expr: item, .. }] = select.projection.as_slice()
    else {
        return None;
    };
    if query.limit_clause.is_some() || query.with.is_some() || select.distinct.is_some() || !plain(select) {
        return None;
    }
    let order = match query.order_by.as_ref().map(|o| &o.kind) {
        None => String::new(),
        Some(OrderByKind::Expressions(exprs)) => {
            let exprs: Vec<String> = exprs
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if matches!(&e.expr, Expr::Value(v) if v.value == Value::Number("1".into(), false)) {
                        e.expr = item.clone();
                    }
                    e.to_string()
                })
                .collect();
            format!(" ORDER BY {}", exprs.join(", "))
        }
        Some(OrderByKind::All(_)) => return None,
    };
    let mut aggregated = select.clone();
    aggregated.projection = vec![SelectItem::UnnamedExpr(parse_expr(&format!("array_agg({item}{order})"))?)];
    let mut subquery = query.clone();
    subquery.order_by = None;
    *subquery.body = SetExpr::Select(aggregated);
    Some(Expr::Subquery(Box::new(subquery)))
}

/// No grouping.
fn plain(select: &Select) -> bool {
    select.having.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
}

/// Whether the SELECT reads a relation that is always empty (or a subquery that returns
/// nothing) other than through an outer join.
fn reads_empty_relation(select: &Select) -> bool {
    let empty = |factor: &TableFactor| match factor {
        TableFactor::Table { name, args: None, .. } => name.0.last().is_some_and(|n| always_empty(&n.to_string())),
        TableFactor::Derived { subquery, .. } => always_null(subquery),
        _ => false,
    };
    select.from.iter().any(|from| {
        empty(&from.relation)
            || from.joins.iter().any(|j| {
                matches!(j.join_operator, JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_))
                    && empty(&j.relation)
            })
    })
}

/// A SELECT that reads an always-empty relation and does not aggregate: it has no rows.
fn returns_nothing(select: &Select) -> bool {
    reads_empty_relation(select)
        && plain(select)
        && !select.projection.iter().any(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => aggregates(e),
            _ => false,
        })
}

/// A subquery that returns nothing: a scalar one is NULL.
fn always_null(query: &Query) -> bool {
    matches!(query.body.as_ref(), SetExpr::Select(select) if returns_nothing(select))
}

/// The select list and WHERE clause of a SELECT that returns nothing are never computed, so
/// what DataFusion may not be able to plan there (subqueries, `generate_subscripts`,
/// `json_build_object`, composite field access, ...) goes: the select list's computed
/// values become NULL (column references keep their types) and the WHERE clause `false`.
fn null_computed_columns(select: &mut Select) {
    for item in &mut select.projection {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(expr) => (expr, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
            _ => continue,
        };
        if matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_)) {
            continue;
        }
        let alias = alias.unwrap_or_else(|| Ident::with_quote('"', expr.to_string()));
        *item = SelectItem::ExprWithAlias { expr: Expr::Value(Value::Null.into()), alias };
    }
}

/// Qualified column references (`q.c`, `schema.q.c`) in an expression: those whose
/// relation `q` is one of `inner`, and how many others there are; `None` if it has an
/// unqualified column or a subquery, which cannot be placed.
fn column_refs(expr: &Expr, inner: &BTreeSet<String>) -> Option<(Vec<Expr>, usize)> {
    let (mut found, mut outer) = (Vec::new(), 0);
    let unsure = visit_expressions(expr, |e| match e {
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            if inner.contains(&parts[parts.len() - 2].value.to_lowercase()) {
                found.push(e.clone());
            } else {
                outer += 1;
            }
            ControlFlow::Continue(())
        }
        Expr::Identifier(_) | Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    });
    (!unsure.is_break()).then_some((found, outer))
}

fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner) => conjuncts(*inner, out),
        other => out.push(other),
    }
}

fn and(exprs: Vec<Expr>) -> Option<Expr> {
    exprs.into_iter().reduce(|l, r| Expr::BinaryOp { left: Box::new(l), op: BinaryOperator::And, right: Box::new(r) })
}

impl CatalogIdioms {
    /// Turns each correlated `(SELECT v FROM r1, r2 WHERE ..)` of the select list and the
    /// WHERE clause into a LEFT JOIN: `LEFT JOIN (SELECT v, <inner columns> FROM r1, r2
    /// WHERE <uncorrelated>) sq ON <correlated predicates over sq's columns>`, the
    /// subquery's place reading `sq.v`. Like the subquery, the join yields NULL where nothing
    /// matches.
    fn decorrelate(&mut self, select: &mut Select) {
        let wildcard =
            select.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
        if select.from.len() != 1 || wildcard {
            return;
        }
        // The scalar subqueries of this level (not those nested in its subqueries), lifted.
        let subqueries = &mut self.subqueries;
        let mut joins = Vec::new();
        let mut lift_subquery = |expr: &mut Expr| {
            if let Expr::Subquery(query) = &*expr {
                let alias = format!("__subquery{}", *subqueries + 1);
                if let Some(join) = lift(query, &alias) {
                    *subqueries += 1;
                    joins.push(join);
                    *expr = Expr::CompoundIdentifier(vec![Ident::new(alias), Ident::new("v")]);
                }
            }
        };
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item {
                map_outside_subqueries(expr, &mut lift_subquery);
            }
        }
        if let Some(selection) = &mut select.selection {
            map_outside_subqueries(selection, &mut lift_subquery);
        }
        select.from[0].joins.extend(joins);
    }
}

/// A `pg_catalog` or `information_schema` relation, where at most one row matches what
/// catalog queries correlate on (an OID), so a join cannot repeat rows where PostgreSQL's
/// subquery would have failed on them.
fn is_catalog_relation(name: &ObjectName) -> bool {
    let parts: Vec<String> = name.0.iter().map(|p| p.to_string().to_lowercase()).collect();
    match parts.as_slice() {
        [table] => PG_CATALOG_VIEWS.iter().any(|v| v.name == table),
        [schema, _] => schema == PG_CATALOG || schema == INFORMATION_SCHEMA,
        _ => false,
    }
}

/// The LEFT JOIN that replaces a correlated scalar subquery over catalog relations, if it has
/// the simple shape.
fn lift(query: &Query, alias: &str) -> Option<Join> {
    let SetExpr::Select(inner) = query.body.as_ref() else { return None };
    if always_null(query) {
        return None;
    }
    let [SelectItem::UnnamedExpr(value) | SelectItem::ExprWithAlias { expr: value, .. }] = inner.projection.as_slice()
    else {
        return None;
    };
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || inner.distinct.is_some()
        || !plain(inner)
    {
        return None;
    }
    // An aggregated subquery is one row whatever matches, which DataFusion plans itself.
    if aggregates(value) {
        return None;
    }
    let mut names = BTreeSet::new();
    for factor in
        inner.from.iter().flat_map(|from| std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)))
    {
        let TableFactor::Table { name, alias, args: None, .. } = factor else { return None };
        if !is_catalog_relation(name) {
            return None;
        }
        names.insert(
            alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .or_else(|| name.0.last().map(|p| p.to_string()))?
                .to_lowercase(),
        );
    }
    if column_refs(value, &names)?.1 > 0 {
        return None;
    }
    // Join conditions stay in the subquery, so they must not read the outer query.
    for join in inner.from.iter().flat_map(|from| &from.joins) {
        let (JoinOperator::Join(constraint)
        | JoinOperator::Inner(constraint)
        | JoinOperator::LeftOuter(constraint)
        | JoinOperator::Left(constraint)) = &join.join_operator
        else {
            return None;
        };
        if let JoinConstraint::On(on) = constraint
            && column_refs(on, &names)?.1 > 0
        {
            return None;
        }
    }
    let mut all = Vec::new();
    if let Some(selection) = inner.selection.clone() {
        conjuncts(selection, &mut all);
    }
    let (mut local, mut correlated, mut columns) = (Vec::new(), Vec::new(), Vec::<Expr>::new());
    for conjunct in all {
        let (refs, outer) = column_refs(&conjunct, &names)?;
        if outer == 0 {
            local.push(conjunct);
            continue;
        }
        for r in refs {
            if !columns.contains(&r) {
                columns.push(r);
            }
        }
        correlated.push(conjunct);
    }
    let mut on = and(correlated)?;
    let _ = visit_expressions_mut(&mut on, |e| {
        if let Some(i) = columns.iter().position(|c| c == e) {
            *e = Expr::CompoundIdentifier(vec![Ident::new(alias), Ident::new(format!("c{i}"))]);
        }
        ControlFlow::<()>::Continue(())
    });
    let mut derived = inner.as_ref().clone();
    derived.projection = std::iter::once(SelectItem::ExprWithAlias { expr: value.clone(), alias: Ident::new("v") })
        .chain(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| SelectItem::ExprWithAlias { expr: c.clone(), alias: Ident::new(format!("c{i}")) }),
        )
        .collect();
    derived.selection = and(local);
    let mut join = parse_select(&format!("SELECT 1 FROM outer_relation LEFT JOIN (SELECT 1) AS {alias} ON true"))?
        .from
        .pop()?
        .joins
        .pop()?;
    if let TableFactor::Derived { subquery, .. } = &mut join.relation {
        *subquery.body = SetExpr::Select(Box::new(derived));
    }
    if let JoinOperator::LeftOuter(JoinConstraint::On(condition)) | JoinOperator::Left(JoinConstraint::On(condition)) =
        &mut join.join_operator
    {
        *condition = on;
    }
    Some(join)
}

/// Whether the expression aggregates at its own query level (not in a subquery of it).
fn aggregates(expr: &Expr) -> bool {
    struct Aggregates {
        depth: usize,
    }
    impl Visitor for Aggregates {
        type Break = ();

        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }

        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }

        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            let aggregate =
                ["count", "sum", "min", "max", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "every"];
            match expr {
                Expr::Function(f)
                    if self.depth == 0 && aggregate.iter().any(|a| f.name.to_string().eq_ignore_ascii_case(a)) =>
                {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    expr.visit(&mut Aggregates { depth: 0 }).is_break()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::rewritten_by;

    fn rewritten(sql: &str) -> String {
        rewritten_by(sql, rewrite)
    }

    #[test]
    fn operators_collations_and_qualified_functions_become_plain_sql() {
        assert_eq!(
            rewritten(
                "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid)"
            ),
            "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname ~ '^(t)$' AND pg_table_is_visible(c.oid)"
        );
        assert_eq!(
            rewritten("SELECT current_user AS u, current_schema AS s, session_user AS su"),
            "SELECT current_user() AS u, current_schema() AS s, session_user() AS su"
        );
        // A rewritten item keeps the name its text gives it.
        assert_eq!(rewritten("SELECT current_user"), "SELECT current_user() AS \"current_user\"");
    }

    #[test]
    fn repeated_column_names_are_made_unique() {
        assert_eq!(
            rewritten("SELECT db.oid, db.* FROM pg_database db"),
            "SELECT db.oid, db.* EXCLUDE (oid) FROM pg_catalog.pg_database db"
        );
        assert_eq!(rewritten("SELECT pubname, NULL, NULL FROM p"), "SELECT pubname, NULL, NULL AS \"NULL_3\" FROM p");
    }

    #[test]
    fn bare_catalog_relations_are_qualified() {
        assert_eq!(
            rewritten("SELECT * FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_custom x ON true"),
            "SELECT * FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace JOIN pg_custom x ON true"
        );
    }

    #[test]
    fn reg_casts_look_names_up_and_show_oids_as_names() {
        assert_eq!(
            rewritten(
                "SELECT c.oid::pg_catalog.regclass AS a, c.reloftype::pg_catalog.regtype::pg_catalog.text AS b, n::regnamespace::text AS c \
                 FROM x WHERE d.classoid = 'pg_class'::regclass AND t = $1::pg_catalog.regtype"
            ),
            "SELECT regclassout(c.oid) AS a, regtypeout(c.reloftype) AS b, regnamespaceout(n) AS c \
             FROM x WHERE d.classoid = to_regclass('pg_class') AND t = to_regtype($1)"
        );
        assert_eq!(
            rewritten(
                "SELECT a::pg_catalog.int2[] AS a FROM x WHERE t.typinput = 'pg_catalog.array_in'::regproc AND o = '16384'::oid"
            ),
            "SELECT a::SMALLINT[] AS a FROM x WHERE t.typinput = 'array_in' AND o = '16384'::INT"
        );
    }

    #[test]
    fn like_escapes_become_backslashes() {
        assert_eq!(
            rewritten("SELECT nspname FROM n WHERE nspname NOT LIKE 'pg/_' || '%' ESCAPE '/'"),
            "SELECT nspname FROM n WHERE nspname NOT LIKE 'pg\\_%'"
        );
        assert_eq!(
            rewritten("SELECT 1 FROM n WHERE a LIKE $1 ESCAPE '/'"),
            "SELECT 1 FROM n WHERE a LIKE replace(replace(replace(replace($1, '\\', '\\\\'), '//', '\u{1}'), '/', '\\'), '\u{1}', '/')"
        );
    }

    #[test]
    fn array_subqueries_aggregate() {
        assert_eq!(
            rewritten("SELECT array(SELECT rolname FROM pg_roles WHERE oid = 10 ORDER BY 1) AS roles"),
            "SELECT (SELECT array_agg(rolname ORDER BY rolname) FROM pg_catalog.pg_roles WHERE oid = 10) AS roles"
        );
        assert_eq!(
            rewritten(
                "SELECT c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x) AS o FROM pg_class c"
            ),
            "SELECT c.reloptions || CAST(make_array() AS TEXT[]) AS o FROM pg_catalog.pg_class c"
        );
    }

    #[test]
    fn correlated_scalar_subqueries_become_left_joins() {
        assert_eq!(
            rewritten(
                "SELECT a.attname, (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t \
                 WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation \
                 FROM pg_catalog.pg_attribute a WHERE a.attrelid = '16384' ORDER BY a.attnum"
            ),
            "SELECT a.attname, __subquery1.v AS attcollation FROM pg_catalog.pg_attribute a \
             LEFT JOIN (SELECT c.collname AS v, c.oid AS c0, t.oid AS c1, t.typcollation AS c2 FROM pg_catalog.pg_collation c, pg_catalog.pg_type t) AS __subquery1 \
             ON __subquery1.c0 = a.attcollation AND __subquery1.c1 = a.atttypid AND a.attcollation <> __subquery1.c2 \
             WHERE a.attrelid = '16384' ORDER BY a.attnum"
        );
        // Aggregated subqueries are left to DataFusion.
        let aggregated = "SELECT (SELECT count(*) FROM t WHERE t.k = o.k) FROM o";
        assert_eq!(rewritten(aggregated), aggregated);
    }

    #[test]
    fn what_always_empty_relations_would_compute_is_null() {
        assert_eq!(
            rewritten(
                "SELECT pol.polname, array(select rolname from pg_roles where oid = any (pol.polroles)) AS roles, pol.polcmd = 'r' \
                 FROM pg_catalog.pg_policy pol WHERE pol.polrelid = '16384'"
            ),
            "SELECT pol.polname, NULL AS roles, NULL AS \"pol.polcmd = 'r'\" FROM pg_catalog.pg_policy pol WHERE false"
        );
        assert_eq!(
            rewritten(
                "SELECT (SELECT json_build_object('a', s.seqstart) FROM pg_sequence s WHERE s.seqrelid = c.oid) AS identity, \
                 (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid) AS children FROM pg_class c"
            ),
            "SELECT NULL AS identity, (SELECT count(*) FROM pg_catalog.pg_inherits i WHERE i.inhparent = c.oid) AS children FROM pg_catalog.pg_class c"
        );
    }
}
