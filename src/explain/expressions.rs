//! Expressions as Spark prints Catalyst expressions: attributes with their expression ids
//! (`account_id#14L`), infix comparisons in parentheses, lower-case function names, literals
//! unquoted.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate};
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Operator, WindowFrame, WindowFrameBound, WindowFrameUnits};
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NegativeExpr,
    NotExpr, TryCastExpr,
};
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr, ScalarFunctionExpr};
use datafusion::physical_expr_common::physical_expr::fmt_sql;

use crate::catalog::types::SparkType;
use crate::exec::short_circuit::ShortCircuit;
use crate::planner::ansi_arithmetic::{ANSI_NEGATE, ansi_operator};
use crate::planner::normalize_nan_and_zero::{NORMALIZE_NAN, NORMALIZE_NAN_AND_ZERO};
use crate::planner::spark_casts::is_cast_conversion;

/// A named value produced by an operator. Spark gives each one a session-unique expression
/// id when it is first produced and keeps it while the value flows up unchanged.
#[derive(Debug, Clone)]
pub(super) struct Attr {
    pub name: String,
    pub id: u64,
    pub data_type: DataType,
    pub nullable: bool,
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = if self.data_type == DataType::Int64 { "L" } else { "" };
        write!(f, "{}#{}{suffix}", self.name, self.id)
    }
}

/// How a column reference is printed: as the attribute it reads, or as Spark's bound
/// reference `input[i, type, nullable]` (broadcast modes).
pub(super) enum Columns<'a> {
    Attrs(&'a [Attr]),
    Bound(&'a [Attr]),
}

impl Columns<'_> {
    fn column(&self, column: &Column) -> String {
        match self {
            Columns::Attrs(attrs) => attrs.get(column.index()).map_or_else(|| column.to_string(), Attr::to_string),
            Columns::Bound(attrs) => attrs.get(column.index()).map_or_else(
                || column.to_string(),
                |a| format!("input[{}, {}, {}]", column.index(), spark_type(&a.data_type), a.nullable),
            ),
        }
    }
}

pub(super) fn join(items: impl IntoIterator<Item = impl fmt::Display>, separator: &str) -> String {
    items.into_iter().map(|i| i.to_string()).collect::<Vec<_>>().join(separator)
}

/// `[a, b]`, Spark's rendering of an expression list.
pub(super) fn list(items: impl IntoIterator<Item = impl fmt::Display>) -> String {
    format!("[{}]", join(items, ", "))
}

/// The type as Spark's `simpleString` spells it (`bigint`, `decimal(10,2)`).
pub(super) fn spark_type(data_type: &DataType) -> String {
    SparkType::from_arrow(data_type).map_or_else(|_| data_type.to_string().to_lowercase(), |t| t.as_str().to_string())
}

/// The arguments of the `coalesce` a CASE stands for: `CASE WHEN isnotnull(a) THEN a WHEN
/// isnotnull(b) THEN b ELSE c END` is how DataFusion runs `coalesce(a, b, c)`.
fn coalesce_arguments(case: &CaseExpr) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    if case.expr().is_some() {
        return None;
    }
    let mut args = Vec::new();
    for (when, then) in case.when_then_expr() {
        let tested = when.downcast_ref::<IsNotNullExpr>()?.arg();
        if !tested.eq(then) {
            return None;
        }
        args.push(Arc::clone(then));
    }
    args.push(Arc::clone(case.else_expr()?));
    Some(args)
}

pub(super) fn render(expr: &Arc<dyn PhysicalExpr>, columns: &Columns) -> String {
    let r = |e: &Arc<dyn PhysicalExpr>| render(e, columns);
    if let Some(column) = expr.downcast_ref::<Column>() {
        columns.column(column)
    } else if let Some(literal) = expr.downcast_ref::<Literal>() {
        literal_text(literal.value())
    } else if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        binary_text(binary.op(), r(binary.left()), r(binary.right()))
    } else if let Some(lazy) = expr.downcast_ref::<ShortCircuit>() {
        match lazy.shown() {
            Some(shown) => r(shown),
            None => binary_text(lazy.op(), r(lazy.left()), r(lazy.right())),
        }
    } else if let Some(e) = expr.downcast_ref::<IsNotNullExpr>() {
        format!("isnotnull({})", r(e.arg()))
    } else if let Some(e) = expr.downcast_ref::<IsNullExpr>() {
        format!("isnull({})", r(e.arg()))
    } else if let Some(e) = expr.downcast_ref::<NotExpr>() {
        format!("NOT {}", r(e.arg()))
    } else if let Some(e) = expr.downcast_ref::<NegativeExpr>() {
        format!("-{}", r(e.arg()))
    } else if let Some(e) = expr.downcast_ref::<CastExpr>() {
        format!("cast({} as {})", r(unconverted(e.expr())), spark_type(e.cast_type()))
    } else if let Some(e) = expr.downcast_ref::<TryCastExpr>() {
        format!("try_cast({} as {})", r(unconverted(e.expr())), spark_type(e.cast_type()))
    } else if let Some(e) = expr.downcast_ref::<InListExpr>() {
        let text = format!("{} IN ({})", r(e.expr()), join(e.list().iter().map(r), ","));
        if e.negated() { format!("NOT {text}") } else { text }
    } else if let Some(e) = expr.downcast_ref::<LikeExpr>() {
        let text = if e.case_insensitive() {
            format!("ilike({}, {})", r(e.expr()), r(e.pattern()))
        } else {
            format!("{} LIKE {}", r(e.expr()), r(e.pattern()))
        };
        if e.negated() { format!("NOT {text}") } else { text }
    } else if let Some(args) = expr.downcast_ref::<CaseExpr>().and_then(coalesce_arguments) {
        format!("coalesce({})", join(args.iter().map(r), ", "))
    } else if let Some(e) = expr.downcast_ref::<CaseExpr>() {
        let mut text = String::from("CASE");
        if let Some(base) = e.expr() {
            text += &format!(" {}", r(base));
        }
        for (when, then) in e.when_then_expr() {
            text += &format!(" WHEN {} THEN {}", r(when), r(then));
        }
        if let Some(otherwise) = e.else_expr() {
            text += &format!(" ELSE {}", r(otherwise));
        }
        text + " END"
    } else if let Some(e) = expr.downcast_ref::<ScalarFunctionExpr>()
        && is_cast_conversion(e.name())
        && let [operand] = e.args()
    {
        format!("cast({} as {})", r(operand), spark_type(e.return_type()))
    } else if let Some(e) = expr.downcast_ref::<ScalarFunctionExpr>()
        && e.name() == ANSI_NEGATE
        && let [operand] = e.args()
    {
        format!("-{}", r(operand))
    } else if let Some(e) = expr.downcast_ref::<ScalarFunctionExpr>()
        && (e.name() == NORMALIZE_NAN_AND_ZERO || e.name() == NORMALIZE_NAN)
        && let [operand] = e.args()
    {
        // Spark compares floats with NaN and -0.0 normalised; its plan shows that on keys only.
        r(operand)
    } else if let Some(e) = expr.downcast_ref::<ScalarFunctionExpr>()
        && let Some(op) = ansi_operator(e.name())
        && let [left, right] = e.args()
    {
        binary_text(&op, r(left), r(right))
    } else if let Some(e) = expr.downcast_ref::<ScalarFunctionExpr>() {
        format!("{}({})", e.name().to_lowercase(), join(e.args().iter().map(r), ", "))
    } else {
        fmt_sql(expr.as_ref()).to_string()
    }
}

/// The value a cast's conversion converts (Spark's plan shows only the cast), or `expr`.
fn unconverted(expr: &Arc<dyn PhysicalExpr>) -> &Arc<dyn PhysicalExpr> {
    match expr.downcast_ref::<ScalarFunctionExpr>().map(|e| (is_cast_conversion(e.name()), e.args())) {
        Some((true, [operand])) => operand,
        _ => expr,
    }
}

fn binary_text(op: &Operator, left: String, right: String) -> String {
    let infix = |symbol: &str| format!("({left} {symbol} {right})");
    match op {
        Operator::NotEq => format!("NOT ({left} = {right})"),
        Operator::IsNotDistinctFrom => infix("<=>"),
        Operator::IsDistinctFrom => format!("NOT ({left} <=> {right})"),
        Operator::IntegerDivide => infix("div"),
        Operator::StringConcat => format!("concat({left}, {right})"),
        Operator::BitwiseShiftLeft => format!("shiftleft({left}, {right})"),
        Operator::BitwiseShiftRight => format!("shiftright({left}, {right})"),
        Operator::RegexMatch => format!("RLIKE({left}, {right})"),
        Operator::RegexNotMatch => format!("NOT RLIKE({left}, {right})"),
        Operator::LikeMatch => format!("{left} LIKE {right}"),
        Operator::NotLikeMatch => format!("NOT {left} LIKE {right}"),
        Operator::ILikeMatch => format!("ilike({left}, {right})"),
        Operator::NotILikeMatch => format!("NOT ilike({left}, {right})"),
        other => infix(&other.to_string()),
    }
}

/// A literal as Spark's `Literal.toString` prints it: strings without quotes, dates and
/// timestamps in ISO form, `null` for nulls.
pub(super) fn literal_text(value: &ScalarValue) -> String {
    if value.is_null() {
        return "null".into();
    }
    match value {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s.clone(),
        ScalarValue::Float32(Some(v)) => java_double(f64::from(*v)),
        ScalarValue::Float64(Some(v)) => java_double(*v),
        ScalarValue::Date32(Some(days)) => NaiveDate::from_num_days_from_ce_opt(days + 719_163)
            .map_or_else(|| days.to_string(), |d| d.format("%Y-%m-%d").to_string()),
        ScalarValue::TimestampMicrosecond(Some(v), _) => timestamp(*v, TimeUnit::Microsecond),
        ScalarValue::TimestampMillisecond(Some(v), _) => timestamp(*v, TimeUnit::Millisecond),
        ScalarValue::TimestampSecond(Some(v), _) => timestamp(*v, TimeUnit::Second),
        ScalarValue::TimestampNanosecond(Some(v), _) => timestamp(*v, TimeUnit::Nanosecond),
        ScalarValue::Binary(Some(bytes))
        | ScalarValue::LargeBinary(Some(bytes))
        | ScalarValue::BinaryView(Some(bytes)) => {
            format!("0x{}", join(bytes.iter().map(|b| format!("{b:02X}")), ""))
        }
        other => other.to_string(),
    }
}

/// Java's `Double.toString`: plain between 1e-3 and 1e7, scientific (`1.0E10`) outside.
fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = v.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = v.to_string();
        if text.contains('.') { text } else { format!("{text}.0") }
    } else {
        let text = format!("{v:e}");
        let (mantissa, exponent) = text.split_once('e').expect("scientific notation has an exponent");
        let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
        format!("{mantissa}E{exponent}")
    }
}

/// A timestamp in the session time zone (UTC), fractional seconds only when non-zero.
fn timestamp(value: i64, unit: TimeUnit) -> String {
    let nanos = match unit {
        TimeUnit::Second => i128::from(value) * 1_000_000_000,
        TimeUnit::Millisecond => i128::from(value) * 1_000_000,
        TimeUnit::Microsecond => i128::from(value) * 1_000,
        TimeUnit::Nanosecond => i128::from(value),
    };
    let seconds = nanos.div_euclid(1_000_000_000) as i64;
    let fraction = nanos.rem_euclid(1_000_000_000) as u32;
    let Some(time) = DateTime::from_timestamp(seconds, fraction) else {
        return value.to_string();
    };
    let text = time.format("%Y-%m-%d %H:%M:%S").to_string();
    match fraction {
        0 => text,
        f => format!("{text}.{}", format!("{f:09}").trim_end_matches('0')),
    }
}

/// Spark normalizes floating-point keys of joins, aggregates and hash partitionings so
/// `-0.0` and `0.0`, and all NaNs, meet.
pub(super) fn key(expr: &Arc<dyn PhysicalExpr>, schema: &Schema, columns: &Columns) -> String {
    let text = render(expr, columns);
    match expr.data_type(schema) {
        Ok(DataType::Float16 | DataType::Float32 | DataType::Float64) => {
            format!("knownfloatingpointnormalized(normalizenanandzero({text}))")
        }
        _ => text,
    }
}

/// `k#1 ASC NULLS FIRST`.
pub(super) fn sort_order(text: String, sort: &PhysicalSortExpr) -> String {
    let direction = if sort.options.descending { "DESC" } else { "ASC" };
    let nulls = if sort.options.nulls_first { "NULLS FIRST" } else { "NULLS LAST" };
    format!("{text} {direction} {nulls}")
}

/// Spark's `specifiedwindowframe(RowFrame, unboundedpreceding$(), currentrow$())`.
pub(super) fn window_frame(frame: &WindowFrame) -> String {
    let units = match frame.units {
        WindowFrameUnits::Rows => "RowFrame",
        WindowFrameUnits::Range => "RangeFrame",
        WindowFrameUnits::Groups => "GroupsFrame",
    };
    let bound = |bound: &WindowFrameBound| match bound {
        WindowFrameBound::CurrentRow => "currentrow$()".to_string(),
        WindowFrameBound::Preceding(v) if v.is_null() => "unboundedpreceding$()".to_string(),
        WindowFrameBound::Following(v) if v.is_null() => "unboundedfollowing$()".to_string(),
        WindowFrameBound::Preceding(v) => format!("-{}", literal_text(v)),
        WindowFrameBound::Following(v) => literal_text(v),
    };
    format!("specifiedwindowframe({units}, {}, {})", bound(&frame.start_bound), bound(&frame.end_bound))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, in_list, is_not_null, lit};

    use super::*;

    #[test]
    fn expressions_print_as_catalyst_does() {
        let schema =
            Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("d", DataType::Float64, true)]);
        let attrs = [
            Attr { name: "k".into(), id: 14, data_type: DataType::Int64, nullable: true },
            Attr { name: "d".into(), id: 15, data_type: DataType::Float64, nullable: false },
        ];
        let k = col("k", &schema).unwrap();
        let d = col("d", &schema).unwrap();
        let columns = Columns::Attrs(&attrs);
        let condition = binary(
            is_not_null(Arc::clone(&k)).unwrap(),
            Operator::And,
            binary(Arc::clone(&k), Operator::Eq, lit(42i64), &schema).unwrap(),
            &schema,
        )
        .unwrap();
        assert_eq!(render(&condition, &columns), "(isnotnull(k#14L) AND (k#14L = 42))");
        let not_equal = binary(Arc::clone(&k), Operator::NotEq, lit("x"), &schema).unwrap();
        assert_eq!(render(&not_equal, &columns), "NOT (k#14L = x)");
        let listed = in_list(Arc::clone(&k), vec![lit(1i64), lit(2i64)], &false, &schema).unwrap();
        assert_eq!(render(&listed, &columns), "k#14L IN (1,2)");
        let cast: Arc<dyn PhysicalExpr> = Arc::new(CastExpr::new(Arc::clone(&k), DataType::Float64, None));
        assert_eq!(
            key(&cast, &schema, &columns),
            "knownfloatingpointnormalized(normalizenanandzero(cast(k#14L as double)))"
        );
        assert_eq!(render(&d, &Columns::Bound(&attrs)), "input[1, double, false]");
        assert_eq!(literal_text(&ScalarValue::Date32(Some(20455))), "2026-01-02");
        assert_eq!(literal_text(&ScalarValue::Float64(Some(1e10))), "1.0E10");
        assert_eq!(literal_text(&ScalarValue::Float64(Some(2.5))), "2.5");
        assert_eq!(literal_text(&ScalarValue::TimestampMicrosecond(Some(1_500_000), None)), "1970-01-01 00:00:01.5");
    }
}
