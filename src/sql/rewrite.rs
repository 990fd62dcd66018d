//! Rewrites of a parsed query that make DataFusion answer as Spark and PostgreSQL do.
//!
//! - Integer literals that fit 32 bits are `INT`, as in Spark and PostgreSQL (DataFusion
//!   reads every integer literal as BIGINT). This is what makes `hash(1)` Spark's `hash(1)`
//!   and lets `date_add(d, 3)` find Spark's INT signature. Ordinals (`ORDER BY 1`,
//!   `GROUP BY 1`), `LIMIT` / `OFFSET` and interval counts (`INTERVAL 2 DAY`) keep their
//!   literals.
//! - Literals with an exponent (`1e3`, `2.5E-4`) are DOUBLE, as Spark reads them; other
//!   fractional literals stay DECIMAL (`parse_float_as_decimal`), as in Spark.
//! - `row_number()`, `rank()`, `dense_rank()` and `ntile(n)` are `INT`, as Spark types them
//!   (DataFusion's are unsigned 64-bit), so that they compare, hash and shuffle as Spark's do.
//! - Unaliased expressions in the outermost SELECT are named by their SQL text, as Spark
//!   names them (`1`, `CAST(x AS STRING)`, `count(*)`), instead of DataFusion's internal
//!   display (`Int64(1)`).
//! - A grouped query sorted by ordinals, select aliases or selected expressions sorts in an
//!   outer query over its output when one of those aliases names a column that a group key
//!   casts. DataFusion names the key `CAST(q.c1 AS BIGINT)` after its operand, `c1`, and
//!   resolving `ORDER BY` through the aggregate took the alias `c1` for that key: `SELECT
//!   CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 … GROUP BY 1, 2 ORDER BY 2` sorted by `c0`.
//! - `CEIL(x)` and `FLOOR(x)` are the session's `ceil` and `floor`, Spark's (a BIGINT of a
//!   DOUBLE), where DataFusion's SQL planner calls its own.
//! - Spark's `a RLIKE p` and `a REGEXP p` are `a ~ p` (both find the pattern anywhere in
//!   the string; DataFusion has no plan for the `RLIKE` form), and `a div b` is Spark's
//!   `div(a, b)` (DataFusion plans no integer division operator).
//! - `substr` and `substring` call Spark's `substring` (position 0 is the first character, a
//!   negative one counts from the end), where DataFusion plans PostgreSQL's; `isnan(x)` is
//!   false for NULL, as Spark's.
//! - A subscript `c[k]` is Spark's (`get_item`): an array's counts from 0 and fails past the end.
//! - `struct(a, b + 1)` names its fields `a` and `col2`, as Spark's does (DataFusion's `c0`, `c1`).
//! - `sign`, `some`, `any`, `every`, `startswith`, `endswith` and `variance` are
//!   DataFusion's `signum`, `bool_or`, `bool_and`, `starts_with`, `ends_with` and `var_samp`;
//!   `sort_array` sorts NULLs first ascending and last descending; `size` of NULL is NULL;
//!   `try_divide` and `try_mod` are `a / b` and `a % b` where `b` is not 0, `mod` is `a % b`, `positive(x)` is `x` and `negative(x)` is `-x`; `approx_count_distinct` counts
//!   exactly; `regexp_replace` replaces every match, as Spark's; `date_trunc` of a DATE
//!   truncates it as a TIMESTAMP, as Spark's does.
//! - `TIMESTAMP` in a cast or literal is Spark's, a TIMESTAMP with the session's time zone in
//!   microseconds, as a table's TIMESTAMP column is; `TIMESTAMP_NTZ` one without a time zone.
//! - `chr` of a negative number is `''`, of others the character of `n` modulo 256.
//! - `median` is `percentile(x, 0.5)` (see `functions::percentile`); `max_by` and `min_by` are
//!   `first_value` in order.
//! - `to_date`, `to_timestamp` and `unix_timestamp` (DataFusion's `to_unixtime`) read Spark's
//!   datetime patterns, as chrono's; `to_timestamp` gives Spark's TIMESTAMP.
//! - `regexp_extract` is built from DataFusion's `regexp_match` (see [`regexp_extract`]).
//! - Spark's `year`, `month`, `dayofmonth` / `day`, `quarter`, `dayofweek`, `dayofyear` and
//!   `weekofyear` are the INT fields of Spark's `date_part` that give them, of a DATE.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, CaseWhen, CastKind, CeilFloorKind, DataType, DateTimeField, DuplicateTreatment,
    ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments,
    GroupByExpr, Ident, LimitClause, ObjectName, OrderBy, OrderByKind, Query, Select, SelectItem, SetExpr, Statement,
    Subscript, TableFactor, TimezoneInfo, TypedString, UnaryOperator, Value, VisitMut, VisitorMut, WindowFrameBound,
    WindowType, visit_expressions, visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::functions::datetime_pattern::chrono_format;
use super::functions::element_at::SUBSCRIPT;
use crate::config::EvalMode;

/// `statement` as DataFusion must read it to answer as Spark does in `mode`.
pub fn rewrite(statement: &mut Statement, mode: EvalMode) {
    match statement {
        Statement::Query(query) => name_select_items(query),
        Statement::Insert(insert) => insert.source.iter_mut().for_each(|q| {
            name_select_items(q);
            number_select_items(q);
        }),
        _ => {}
    }
    let _ = statement.visit(&mut SortAboveCastGroupKeys);
    let _ = statement.visit(&mut NarrowIntegerLiterals);
    let _ = statement.visit(&mut IntRankingFunctions);
    let _ = statement.visit(&mut SparkOperators { mode });
    let _ = statement.visit(&mut ExponentLiteralsAreDouble);
    let _ = statement.visit(&mut LocalTimestamps);
}

struct SortAboveCastGroupKeys;

impl VisitorMut for SortAboveCastGroupKeys {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(output_keys) = output_sort_keys_over_cast_group_keys(query) {
            let mut grouped = query.clone();
            grouped.with = None;
            grouped.order_by = None;
            grouped.limit_clause = None;
            grouped.fetch = None;
            let mut outer = Parser::parse_sql(&GenericDialect {}, "SELECT * FROM (SELECT 1) AS grouped")
                .ok()
                .and_then(|mut statements| statements.pop());
            if let Some(Statement::Query(outer)) = &mut outer
                && let SetExpr::Select(select) = outer.body.as_mut()
                && let Some(TableFactor::Derived { subquery, .. }) =
                    select.from.first_mut().map(|from| &mut from.relation)
                && let Some(OrderBy { kind: OrderByKind::Expressions(keys), .. }) = &mut query.order_by
            {
                **subquery = grouped;
                query.body = outer.body.clone();
                keys.iter_mut().zip(output_keys).for_each(|(key, output)| key.expr = output);
            }
        }
        ControlFlow::Continue(())
    }
}

/// When `query` groups, one of its aliases is the name of a column that a group key or select
/// item casts, and every sort key is an ordinal, an alias or a selected expression that has an
/// alias: the sort keys as references to its output (a selected expression by its alias).
fn output_sort_keys_over_cast_group_keys(query: &Query) -> Option<Vec<Expr>> {
    let (SetExpr::Select(select), Some(OrderBy { kind: OrderByKind::Expressions(keys), .. })) =
        (query.body.as_ref(), &query.order_by)
    else {
        return None;
    };
    let GroupByExpr::Expressions(group_keys, _) = &select.group_by else {
        return None;
    };
    let aliased: Vec<(&Expr, &Ident)> = select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { expr, alias } => Some((expr, alias)),
            _ => None,
        })
        .collect();
    let is_alias = |name: &Ident| aliased.iter().any(|(_, alias)| alias.value.eq_ignore_ascii_case(&name.value));
    let distinct_aliases = aliased
        .iter()
        .enumerate()
        .all(|(i, (_, alias))| aliased[..i].iter().all(|(_, other)| !other.value.eq_ignore_ascii_case(&alias.value)));
    if group_keys.is_empty() || !distinct_aliases {
        return None;
    }
    let output_keys = keys
        .iter()
        .map(|key| match &key.expr {
            Expr::Value(value) if matches!(value.value, Value::Number(..)) => Some(key.expr.clone()),
            Expr::Identifier(name) if is_alias(name) => Some(key.expr.clone()),
            expr => aliased
                .iter()
                .find(|(selected, _)| *selected == expr)
                .map(|(_, alias)| Expr::Identifier((*alias).clone())),
        })
        .collect::<Option<Vec<_>>>()?;
    let mut casts_an_alias = false;
    let projected = select.projection.iter().filter_map(|item| match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => Some(expr),
        _ => None,
    });
    for expr in group_keys.iter().chain(projected) {
        let _ = visit_expressions(expr, |expr| {
            if let Expr::Cast { expr: operand, .. } = expr {
                casts_an_alias |= column_name(operand).is_some_and(is_alias);
            }
            ControlFlow::<()>::Continue(())
        });
    }
    casts_an_alias.then_some(output_keys)
}

struct ExponentLiteralsAreDouble;

impl VisitorMut for ExponentLiteralsAreDouble {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Value(value) = expr
            && let Value::Number(text, _) = &value.value
            && text.contains(['e', 'E'])
        {
            // As text: DataFusion would read the number itself as a DECIMAL first, and refuse
            // one past DECIMAL's range (`1e400`).
            *expr = cast(Expr::value(Value::SingleQuotedString(text.clone())), DataType::Double(ExactNumberInfo::None));
        }
        ControlFlow::Continue(())
    }
}

/// Spark's operators DataFusion has no plan for.
struct SparkOperators {
    mode: EvalMode,
}

impl VisitorMut for SparkOperators {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::RLike { negated, expr: text, pattern, .. } => {
                let op = if *negated { BinaryOperator::PGRegexNotMatch } else { BinaryOperator::PGRegexMatch };
                *expr = Expr::Nested(Box::new(Expr::BinaryOp { left: text.clone(), op, right: pattern.clone() }));
            }
            Expr::BinaryOp { left, op: BinaryOperator::MyIntegerDivide, right } => {
                *expr = function_call("div", vec![(**left).clone(), (**right).clone()]);
            }
            // `CEIL(x)` and `FLOOR(x)` call the session's functions, Spark's, where DataFusion
            // plans its own.
            Expr::Ceil { expr: value, field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime) } => {
                *expr = function_call("ceil", vec![(**value).clone()]);
            }
            Expr::Floor { expr: value, field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime) } => {
                *expr = function_call("floor", vec![(**value).clone()]);
            }
            // DataFusion plans `substr` and `substring` as PostgreSQL's, where position 0 is
            // before the first character; Spark's (registered as `substring`) takes 0 as 1
            // and counts a negative position from the end.
            Expr::Substring { expr: text, substring_from, substring_for, .. } => {
                let from = substring_from.as_deref().cloned().unwrap_or(Expr::value(Value::Number("1".into(), false)));
                let args = [Some((**text).clone()), Some(from), substring_for.as_deref().cloned()];
                *expr = function_call("substring", args.into_iter().flatten().collect());
            }
            // Spark's `isnan` is false for NULL, not NULL.
            Expr::Function(function) if is_function(function, "isnan") => {
                let nan = expr.clone();
                *expr = function_call("coalesce", vec![nan, Expr::value(Value::Boolean(false))]);
            }
            Expr::Function(function) if let Some(name) = spark_name(function) => {
                function.name = ObjectName::from(vec![Ident::new(name)]);
            }
            // Spark's `sort_array(a, asc)`: NULLs first ascending, last descending.
            Expr::Function(function) if is_function(function, "sort_array") => {
                if let Some(args) = arguments(function)
                    && let Some(array) = args.first()
                {
                    let ascending = match args.get(1) {
                        None => Some(true),
                        Some(Expr::Value(value)) => match value.value {
                            Value::Boolean(ascending) => Some(ascending),
                            _ => None,
                        },
                        Some(_) => None,
                    };
                    if let Some(ascending) = ascending {
                        let (order, nulls) = if ascending { ("ASC", "NULLS FIRST") } else { ("DESC", "NULLS LAST") };
                        let text = |t: &str| Expr::value(Value::SingleQuotedString(t.to_string()));
                        *expr = function_call("array_sort", vec![array.clone(), text(order), text(nulls)]);
                    }
                }
            }
            // Spark's `size` of NULL is NULL under ANSI mode (datafusion-spark's is -1, as
            // Spark's is under legacy mode).
            Expr::Function(function) if is_function(function, "size") || is_function(function, "cardinality") => {
                if let Some(collection) = single_argument(function) {
                    let call = function_call("size", vec![collection.clone()]);
                    *expr = match self.mode {
                        EvalMode::Ansi => case_when(Expr::IsNotNull(Box::new(collection)), call, None),
                        EvalMode::Legacy => call,
                    };
                }
            }
            // Spark's replaces every match; DataFusion's only the first, unless told `g`.
            Expr::Function(function) if is_function(function, "regexp_replace") => {
                if let FunctionArguments::List(list) = &mut function.args
                    && list.args.len() == 3
                {
                    list.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::value(
                        Value::SingleQuotedString("g".into()),
                    ))));
                }
            }
            // Spark's `date_trunc` truncates a TIMESTAMP, to which a DATE is cast.
            Expr::Function(function) if is_function(function, "date_trunc") => {
                if let FunctionArguments::List(list) = &mut function.args
                    && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(value))) = list.args.get_mut(1)
                {
                    *value = cast(value.clone(), local_timestamp());
                }
            }
            // Spark's `chr(n)`: '' below 0, else the character of `n` modulo 256.
            Expr::Function(function) if is_function(function, "chr") || is_function(function, "char") => {
                if let Some(code) = single_argument(function) {
                    let byte = function_call("pmod", vec![code.clone(), number("256")]);
                    let negative =
                        Expr::BinaryOp { left: Box::new(code), op: BinaryOperator::Lt, right: Box::new(number("0")) };
                    *expr = case_when(
                        negative,
                        Expr::value(Value::SingleQuotedString(String::new())),
                        Some(function_call("chr", vec![byte])),
                    );
                }
            }
            // Spark's subscript `c[k]` counts an array from 0 and fails past its end.
            Expr::CompoundFieldAccess { root, access_chain }
                if access_chain.iter().any(|a| matches!(a, AccessExpr::Subscript(Subscript::Index { .. }))) =>
            {
                let mut value = Some((**root).clone());
                for access in access_chain.iter() {
                    value = value.and_then(|value| match access {
                        AccessExpr::Subscript(Subscript::Index { index }) => {
                            Some(function_call(SUBSCRIPT, vec![value, index.clone()]))
                        }
                        AccessExpr::Dot(Expr::Identifier(field)) => Some(function_call(
                            "get_field",
                            vec![value, Expr::value(Value::SingleQuotedString(field.value.clone()))],
                        )),
                        _ => None,
                    });
                }
                if let Some(value) = value {
                    *expr = value;
                }
            }
            // Spark's `struct(a, b + 1)` names a field after the column it is, else `col2`.
            Expr::Struct { values, fields } if fields.is_empty() => {
                let named = values.iter().enumerate().flat_map(|(i, arg)| {
                    let name = column_name(arg).map_or_else(|| format!("col{}", i + 1), |c| c.value.clone());
                    [Expr::value(Value::SingleQuotedString(name)), arg.clone()]
                });
                *expr = function_call("named_struct", named.collect());
            }
            // Spark's `count_if(p)`: the rows where `p` is true, a BIGINT.
            Expr::Function(function) if is_function(function, "count_if") => {
                if let Some(condition) = single_argument(function) {
                    *expr = function_call("count", vec![case_when(condition, number("1"), None)]);
                }
            }
            // Spark's `try_divide(a, b)` and `try_mod(a, b)`: `a / b` and `a % b`, NULL where
            // `b` is 0 (or -0.0); `mod(a, b)` is `a % b`.
            Expr::Function(function)
                if is_function(function, "try_divide")
                    || is_function(function, "try_mod")
                    || is_function(function, "mod") =>
            {
                if let Some([a, b]) = arguments(function).and_then(|args| <[Expr; 2]>::try_from(args).ok()) {
                    let op = if is_function(function, "try_divide") {
                        BinaryOperator::Divide
                    } else {
                        BinaryOperator::Modulo
                    };
                    let zero = Expr::BinaryOp {
                        left: Box::new(b.clone()),
                        op: BinaryOperator::Eq,
                        right: Box::new(number("0")),
                    };
                    let result = Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(a), op, right: Box::new(b) }));
                    *expr = match is_function(function, "mod") {
                        true => result,
                        false => case_when(zero, Expr::value(Value::Null), Some(result)),
                    };
                }
            }
            // Spark's `positive(x)` is `x`, and `negative(x)` is `-x`.
            Expr::Function(function) if is_function(function, "positive") || is_function(function, "negative") => {
                let negative = is_function(function, "negative");
                if let Some(x) = single_argument(function) {
                    let x = Expr::Nested(Box::new(x));
                    *expr = match negative {
                        true => Expr::UnaryOp { op: UnaryOperator::Minus, expr: Box::new(x) },
                        false => x,
                    };
                }
            }
            // Spark's `median` is `percentile(x, 0.5)`.
            Expr::Function(function) if is_function(function, "median") => {
                function.name = ObjectName::from(vec![Ident::new("percentile")]);
                if let FunctionArguments::List(list) = &mut function.args {
                    list.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(number("0.5"))));
                }
            }
            // Spark's `max_by(x, y)` and `min_by(x, y)`: `x` of the row with the largest or
            // smallest `y`, rows with a NULL `y` left out.
            Expr::Function(function) if is_function(function, "max_by") || is_function(function, "min_by") => {
                if let Some([x, y]) = arguments(function).and_then(|args| <[Expr; 2]>::try_from(args).ok()) {
                    let order = if is_function(function, "max_by") { "DESC" } else { "ASC" };
                    let text =
                        format!("first_value({x} ORDER BY {y} {order} NULLS LAST) FILTER (WHERE {y} IS NOT NULL)");
                    if let Some(first) = parsed(&text) {
                        *expr = first;
                    }
                }
            }
            // Spark's `approx_count_distinct` counted exactly, which is within any error bound:
            // DataFusion's `approx_distinct` is unsigned and refuses DOUBLEs.
            Expr::Function(function) if is_function(function, "approx_count_distinct") => {
                if let Some(arg) = single_argument(function) {
                    let mut count = function_call("count", vec![arg]);
                    if let Expr::Function(Function { args: FunctionArguments::List(list), .. }) = &mut count {
                        list.duplicate_treatment = Some(DuplicateTreatment::Distinct);
                    }
                    *expr = count;
                }
            }
            // Spark's datetime patterns as chrono's, and Spark's TIMESTAMP for `to_timestamp`.
            Expr::Function(function)
                if ["to_date", "to_timestamp", "unix_timestamp"].iter().any(|name| is_function(function, name)) =>
            {
                let parse_to_timestamp = is_function(function, "to_timestamp");
                if is_function(function, "unix_timestamp") {
                    function.name = ObjectName::from(vec![Ident::new("to_unixtime")]);
                }
                if let FunctionArguments::List(list) = &mut function.args
                    && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value)))) = list.args.get_mut(1)
                    && let Value::SingleQuotedString(pattern) = &mut value.value
                    && let Ok(format) = chrono_format(pattern)
                {
                    *pattern = format;
                }
                if parse_to_timestamp {
                    *expr = cast(expr.clone(), local_timestamp());
                }
            }
            Expr::Function(function) if is_function(function, "regexp_extract") => {
                if let Some(extract) = regexp_extract(function) {
                    *expr = extract;
                }
            }
            Expr::Function(function) if let Some(part) = date_field(function) => {
                let Some(arg) = single_argument(function) else { return ControlFlow::Continue(()) };
                // Spark's are functions of a DATE, to which a timestamp or a string is cast.
                let date = cast(arg, DataType::Date);
                let field = function_call("date_part", vec![Expr::value(Value::SingleQuotedString(part.into())), date]);
                *expr = cast(field, DataType::Int(None));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// `CASE WHEN condition THEN result [ELSE otherwise] END`.
fn case_when(condition: Expr, result: Expr, otherwise: Option<Expr>) -> Expr {
    Expr::Case {
        case_token: AttachedToken::empty(),
        end_token: AttachedToken::empty(),
        operand: None,
        conditions: vec![CaseWhen { condition, result }],
        else_result: otherwise.map(Box::new),
    }
}

fn number(digits: &str) -> Expr {
    Expr::value(Value::Number(digits.into(), false))
}

/// DataFusion's name for a Spark function it has under another name.
fn spark_name(function: &Function) -> Option<&'static str> {
    const NAMES: [(&str, &str); 7] = [
        ("sign", "signum"),
        ("some", "bool_or"),
        ("any", "bool_or"),
        ("every", "bool_and"),
        ("startswith", "starts_with"),
        ("endswith", "ends_with"),
        ("variance", "var_samp"),
    ];
    NAMES.iter().find(|(spark, _)| is_function(function, spark)).map(|(_, ours)| *ours)
}

/// Spark's TIMESTAMP: microseconds in the session's time zone (`TIMESTAMP_LTZ`), where
/// DataFusion's SQL `TIMESTAMP` is nanoseconds without one.
fn local_timestamp() -> DataType {
    DataType::Timestamp(Some(6), TimezoneInfo::Tz)
}

struct LocalTimestamps;

impl VisitorMut for LocalTimestamps {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Cast { data_type, .. } | Expr::TypedString(TypedString { data_type, .. }) = expr {
            match data_type {
                DataType::Timestamp(_, TimezoneInfo::None) => *data_type = local_timestamp(),
                // Spark's TIMESTAMP_NTZ: microseconds, without a time zone.
                DataType::TimestampNtz(_) => *data_type = DataType::Timestamp(Some(6), TimezoneInfo::WithoutTimeZone),
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

/// Spark's `regexp_extract(str, regex[, idx])`: group `idx` (default 1, 0 for the whole match)
/// of the first match, `''` where nothing matches or the group took no part in the match, NULL
/// for a NULL `str`. As DataFusion's `regexp_match` of the pattern made a group as a whole,
/// whose element `idx + 1` that is; Rust's regular expressions, not Java's.
fn regexp_extract(function: &Function) -> Option<Expr> {
    let args = arguments(function)?;
    let (text, pattern, group) = match args.as_slice() {
        [text, pattern] => (text, pattern, number("1")),
        [text, pattern, group] => (text, pattern, group.clone()),
        _ => return None,
    };
    let string = |s: &str| Expr::value(Value::SingleQuotedString(s.into()));
    let whole = function_call("concat", vec![string("("), pattern.clone(), string(")")]);
    let element = Expr::BinaryOp { left: Box::new(group), op: BinaryOperator::Plus, right: Box::new(number("1")) };
    let matched =
        function_call("array_element", vec![function_call("regexp_match", vec![text.clone(), whole]), element]);
    // Spark's `substring(str, 1, 0)`: '' for a string, NULL for NULL.
    let empty = function_call("substring", vec![text.clone(), number("1"), number("0")]);
    Some(function_call("coalesce", vec![matched, empty]))
}

/// Spark's date fields DataFusion has no function for, as the field of Spark's `date_part`
/// that gives each (its `dow` counts from 1 on Sunday, as `dayofweek` does). Each is an INT,
/// as in Spark.
fn date_field(function: &Function) -> Option<&'static str> {
    const FIELDS: [(&str, &str); 8] = [
        ("year", "year"),
        ("month", "month"),
        ("dayofmonth", "day"),
        ("day", "day"),
        ("quarter", "quarter"),
        ("dayofweek", "dow"),
        ("dayofyear", "doy"),
        ("weekofyear", "week"),
    ];
    FIELDS.iter().find(|(name, _)| is_function(function, name)).map(|(_, part)| *part)
}

/// `CAST(expr AS data_type)`.
pub(crate) fn cast(expr: Expr, data_type: DataType) -> Expr {
    Expr::Cast { kind: CastKind::Cast, expr: Box::new(expr), data_type, array: false, format: None }
}

/// The one positional argument of `function`.
fn single_argument(function: &Function) -> Option<Expr> {
    let [arg] = <[Expr; 1]>::try_from(arguments(function)?).ok()?;
    Some(arg)
}

/// The arguments of `function`, all positional; `None` if one is named or a wildcard.
pub(crate) fn arguments(function: &Function) -> Option<Vec<Expr>> {
    let FunctionArguments::List(list) = &function.args else { return None };
    list.args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// `text` parsed as one expression.
fn parsed(text: &str) -> Option<Expr> {
    Parser::new(&GenericDialect {}).try_with_sql(text).and_then(|mut p| p.parse_expr()).ok()
}

/// The name of the column `expr` is, if it is one (`c` or `t.c`).
pub(crate) fn column_name(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Identifier(name) => Some(name),
        Expr::CompoundIdentifier(parts) => parts.last(),
        _ => None,
    }
}

/// `f` on `expr` and each expression within it, bottom up, but not inside its subqueries, whose
/// names and levels are their own.
pub(crate) fn map_outside_subqueries(expr: &mut Expr, f: impl FnMut(&mut Expr)) {
    struct OneLevel<F> {
        depth: usize,
        f: F,
    }
    impl<F: FnMut(&mut Expr)> VisitorMut for OneLevel<F> {
        type Break = ();

        fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }

        fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }

        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                (self.f)(expr);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = expr.visit(&mut OneLevel { depth: 0, f });
}

/// `visit` on every SELECT of `statement`'s queries, each side of a set operation included.
pub(crate) fn rewrite_selects(statement: &mut Statement, visit: impl FnMut(&mut Select)) {
    let _ = statement.visit(&mut EachSelect(visit));
}

struct EachSelect<F>(F);

impl<F: FnMut(&mut Select)> VisitorMut for EachSelect<F> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        for_each_select(&mut query.body, &mut self.0);
        ControlFlow::Continue(())
    }
}

/// `f` on each SELECT of a query's body, each side of a set operation included.
pub(crate) fn for_each_select(body: &mut SetExpr, f: &mut impl FnMut(&mut Select)) {
    match body {
        SetExpr::Select(select) => f(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_each_select(left, f);
            for_each_select(right, f);
        }
        _ => {}
    }
}

/// Whether `function` is a plain call of `name` (not qualified, not a window function).
pub(crate) fn is_function(function: &Function, name: &str) -> bool {
    matches!(function.name.0.as_slice(), [part] if part.as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case(name)))
        && function.over.is_none()
}

/// The call `name(args…)`.
pub(crate) fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    let args = args.into_iter().map(|arg| FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))).collect();
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList { duplicate_treatment: None, args, clauses: vec![] }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// Spark's ranking window functions, which return `INT`.
const RANKING_FUNCTIONS: [&str; 4] = ["row_number", "rank", "dense_rank", "ntile"];

struct IntRankingFunctions;

impl VisitorMut for IntRankingFunctions {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(function) = expr
            && function.over.is_some()
            && RANKING_FUNCTIONS.iter().any(|name| function.name.to_string().eq_ignore_ascii_case(name))
        {
            *expr = cast(expr.clone(), DataType::Int(None));
        }
        ControlFlow::Continue(())
    }
}

struct NarrowIntegerLiterals;

fn is_narrowed(expr: &Expr) -> bool {
    matches!(expr, Expr::Cast { kind: CastKind::DoubleColon, data_type: DataType::Int(None), expr, .. }
        if matches!(expr.as_ref(), Expr::Value(v) if matches!(v.value, Value::Number(..))))
}

/// Gives an ordinal or limit back its plain literal.
fn restore(expr: &mut Expr) {
    if is_narrowed(expr)
        && let Expr::Cast { expr: inner, .. } = expr
    {
        *expr = (**inner).clone();
    }
}

impl VisitorMut for NarrowIntegerLiterals {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // Window frame offsets (`ROWS 2 PRECEDING`) must stay plain literals.
        if let Expr::Function(function) = expr
            && let Some(WindowType::WindowSpec(spec)) = &mut function.over
            && let Some(frame) = &mut spec.window_frame
        {
            for bound in [Some(&mut frame.start_bound), frame.end_bound.as_mut()].into_iter().flatten() {
                if let WindowFrameBound::Preceding(Some(offset)) | WindowFrameBound::Following(Some(offset)) = bound {
                    restore(offset);
                }
            }
        }
        // The places of `round` and `bround` must be a constant their return type can read.
        if let Expr::Function(function) = expr
            && (is_function(function, "round") || is_function(function, "bround"))
            && let FunctionArguments::List(list) = &mut function.args
            && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(places))) = list.args.get_mut(1)
        {
            restore(places);
            // `-1` is a negation of `1` as parsed; the return type needs it as one number.
            if let Expr::UnaryOp { op: UnaryOperator::Minus, expr: operand } = places {
                restore(operand);
                if let Expr::Value(value) = operand.as_ref()
                    && let Value::Number(digits, false) = &value.value
                {
                    *places = Expr::value(Value::Number(format!("-{digits}"), false));
                }
            }
        }
        // An interval's count (`INTERVAL 2 DAY`) must stay a plain literal.
        if let Expr::Interval(interval) = expr {
            match interval.value.as_mut() {
                Expr::UnaryOp { expr: count, .. } => restore(count),
                count => restore(count),
            }
        }
        if let Expr::Value(value) = expr
            && let Value::Number(text, false) = &value.value
            && text.parse::<i32>().is_ok()
        {
            *expr = Expr::Cast {
                kind: CastKind::DoubleColon,
                expr: Box::new(expr.clone()),
                data_type: DataType::Int(None),
                array: false,
                format: None,
            };
        }
        ControlFlow::Continue(())
    }

    /// Table functions (`range(10)`, `generate_series(1, 5)`) take BIGINT literals.
    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { args: Some(args), .. } = factor {
            for arg in &mut args.args {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) = arg {
                    restore(expr);
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(order_by) = &mut query.order_by
            && let OrderByKind::Expressions(items) = &mut order_by.kind
        {
            items.iter_mut().for_each(|item| restore(&mut item.expr));
        }
        match &mut query.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, .. }) => {
                limit.iter_mut().for_each(restore);
                offset.iter_mut().for_each(|o| restore(&mut o.value));
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                restore(offset);
                restore(limit);
            }
            None => {}
        }
        if let SetExpr::Select(select) = query.body.as_mut()
            && let GroupByExpr::Expressions(items, _) = &mut select.group_by
        {
            items.iter_mut().for_each(restore);
        }
        ControlFlow::Continue(())
    }
}

fn name_select_items(query: &mut Query) {
    let mut body = query.body.as_mut();
    // Column names of a set operation come from its first branch.
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_mut();
    }
    let SetExpr::Select(select) = body else {
        return;
    };
    for item in &mut select.projection {
        if let SelectItem::UnnamedExpr(expr) = item
            && !matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
        {
            let name = Ident::with_quote('"', spark_column_name(expr));
            *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: name };
        }
    }
}

/// The name a select item without an alias gets: its text, with `count(*)` read as Spark's
/// parser reads it, `count(1)`.
fn spark_column_name(expr: &Expr) -> String {
    let mut named = expr.clone();
    let _ = visit_expressions_mut(&mut named, |expr| {
        if let Expr::Function(Function { name, args: FunctionArguments::List(list), .. }) = expr
            && name.to_string().eq_ignore_ascii_case("count")
            && let [FunctionArg::Unnamed(argument @ FunctionArgExpr::Wildcard)] = list.args.as_mut_slice()
        {
            *argument = FunctionArgExpr::Expr(number("1"));
        }
        ControlFlow::<()>::Continue(())
    });
    named.to_string()
}

/// An INSERT's source columns go to the table by position, so their names do not matter;
/// numbering them lets `SELECT id, id` feed two columns, as Spark allows.
fn number_select_items(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    for (position, item) in select.projection.iter_mut().enumerate() {
        let expr = match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr.clone(),
            _ => continue,
        };
        *item = SelectItem::ExprWithAlias { expr, alias: Ident::new(format!("_c{position}")) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::rewritten_by;

    fn rewritten(sql: &str) -> String {
        rewritten_by(sql, |statement| rewrite(statement, EvalMode::Ansi))
    }

    #[test]
    fn a_grouped_query_sorted_by_the_alias_of_a_cast_column_sorts_its_output() {
        assert_eq!(
            rewritten("SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2 ORDER BY 2 DESC, c0 LIMIT 3"),
            "SELECT * FROM (SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2) AS grouped \
             ORDER BY 2 DESC, c0 LIMIT 3"
        );
        assert_eq!(
            rewritten("SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2 ORDER BY q.p, c0"),
            "SELECT * FROM (SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2) AS grouped ORDER BY c1, c0"
        );
        for unchanged in [
            "SELECT CAST(q.a AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2 ORDER BY 2",
            "SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q GROUP BY 1, 2 ORDER BY q.id",
            "SELECT CAST(q.c1 AS BIGINT) AS c0, q.p AS c1 FROM q ORDER BY 2",
        ] {
            assert_eq!(rewritten(unchanged), unchanged);
        }
    }

    #[test]
    fn small_integer_literals_become_int_but_ordinals_and_limits_do_not() {
        assert_eq!(
            rewritten("SELECT hash(1), 3000000000 AS big FROM t GROUP BY 1 ORDER BY 1 LIMIT 5"),
            "SELECT hash(1::INT) AS \"hash(1)\", 3000000000 AS big FROM t GROUP BY 1 ORDER BY 1 LIMIT 5"
        );
    }

    #[test]
    fn count_star_is_named_count_1_as_in_spark() {
        assert_eq!(
            rewritten("SELECT count(*), count(*) + 1, count(*) AS n FROM t"),
            "SELECT count(*) AS \"count(1)\", count(*) + 1::INT AS \"count(1) + 1\", count(*) AS n FROM t"
        );
    }

    #[test]
    fn window_frame_offsets_stay_plain_literals() {
        assert_eq!(
            rewritten("SELECT sum(a) OVER (ORDER BY b ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS s FROM t"),
            "SELECT sum(a) OVER (ORDER BY b ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS s FROM t"
        );
    }

    #[test]
    fn ranking_window_functions_are_int() {
        assert_eq!(
            rewritten("SELECT rank() OVER (ORDER BY a) AS r, sum(b) OVER () AS s FROM t"),
            "SELECT CAST(rank() OVER (ORDER BY a) AS INT) AS r, sum(b) OVER () AS s FROM t"
        );
    }

    #[test]
    fn exponent_literals_are_double() {
        assert_eq!(rewritten("SELECT 1e3 AS a, 2.5 AS b"), "SELECT CAST('1e3' AS DOUBLE) AS a, 2.5 AS b");
    }

    #[test]
    fn rlike_and_regexp_are_regex_matches() {
        assert_eq!(
            rewritten("SELECT a AS x FROM t WHERE a RLIKE '^x' AND b NOT REGEXP 'y'"),
            "SELECT a AS x FROM t WHERE (a ~ '^x') AND (b !~ 'y')"
        );
    }

    #[test]
    fn unnamed_expressions_are_named_by_their_text() {
        assert_eq!(rewritten("SELECT a, t.b, a + 1 FROM t"), "SELECT a, t.b, a + 1::INT AS \"a + 1\" FROM t");
    }
}
