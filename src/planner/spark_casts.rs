//! Spark's `Cast` (`Cast.scala`, ANSI mode) where DataFusion's converts otherwise:
//!
//! - a TIMESTAMP cast to a number counts seconds since 1970 (an integer rounded down, a DOUBLE
//!   or DECIMAL with the fraction), and a number cast to TIMESTAMP is read as seconds; Arrow
//!   counts in the timestamp's own unit, microseconds here;
//! - a TIMESTAMP cast to a string is `yyyy-MM-dd HH:mm:ss` in the session's time zone, with the
//!   fraction of a second only where there is one and without trailing zeros; Arrow's has a `T`
//!   and the zone;
//! - a FLOAT or DOUBLE cast to a string is Java's text of it (`1.0E7`, `100.0`), where Arrow's
//!   is `10000000` and `100`;
//! - a FLOAT or DOUBLE cast to DECIMAL goes through its shortest decimal text, rounded half up
//!   to the scale (so 688.25 stays 688.25), and NaN and the infinities become NULL, where Arrow
//!   multiplies in binary and fails on NaN;
//! - a DECIMAL cast to DOUBLE is the DOUBLE nearest to it (Java's `BigDecimal.doubleValue`),
//!   where Arrow rounds twice past 2^53 or 22 digits of scale;
//! - a DECIMAL cast to BOOLEAN is whether it is not 0, and a BOOLEAN cast to DECIMAL is 1 or 0,
//!   where Arrow has no such casts;
//! - a string cast to a DATE, TIMESTAMP or DECIMAL is read as Spark reads one
//!   ([`cast_from_string`](super::cast_from_string));
//! - a DATE cast to a number or back, and a DATE or TIMESTAMP cast to BOOLEAN or back, are
//!   refused (`42K09`), `try_cast` too, where Arrow gives the days since 1970 or a BOOLEAN.
//!
//! Under legacy mode (`spark.sql.ansi.enabled = false`) a cast that fails gives NULL, as
//! `try_cast` does, except a cast to an integer type, which converts as Java does
//! ([`legacy_casts`](super::legacy_casts)). Legacy mode also casts a DATE to a number or a
//! BOOLEAN (NULL), a BOOLEAN to a TIMESTAMP (one microsecond past 1970 or none) and a TIMESTAMP
//! to a BOOLEAN (whether it is another instant than 1970's first), which ANSI mode refuses.
//!
//! Runs after DataFusion's type coercion, which has made implicit conversions casts too: those
//! are Spark's casts as well. A TIMESTAMP past a BIGINT's seconds, or seconds past a
//! TIMESTAMP's range, fail with `22003` (NULL in `try_cast`). A conversion runs as a function
//! under the cast; EXPLAIN shows the cast alone, as Spark's plans do.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Float32Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, lit, when,
};
use datafusion::optimizer::AnalyzerRule;

use super::cast_from_string::cast_from_string;
use super::expression_rule::rewrite_expressions;
use super::legacy_casts::{is_legacy_integral_cast, legacy_integral_cast, never_fails};
use crate::config::EvalMode;
use crate::error::{SqlError, cast_type_mismatch};
use crate::exec::columnar::{input_column, shaped_like};

const MICROS_PER_SECOND: i64 = 1_000_000;

#[derive(Debug, Default)]
pub struct SparkCasts;

impl AnalyzerRule for SparkCasts {
    fn name(&self) -> &str {
        "spark_casts"
    }

    fn analyze(&self, plan: LogicalPlan, options: &ConfigOptions) -> Result<LogicalPlan> {
        let mode = EvalMode::of(options);
        rewrite_expressions(plan, |expr, schema| spark_cast(expr, schema, mode))
    }
}

fn spark_cast(expr: Expr, schema: &DFSchema, mode: EvalMode) -> Result<Transformed<Expr>> {
    let (operand, to, tolerant) = match &expr {
        Expr::Cast(Cast { expr, field }) => (expr.as_ref(), field.data_type().clone(), false),
        Expr::TryCast(TryCast { expr, field }) => (expr.as_ref(), field.data_type().clone(), true),
        _ => return Ok(Transformed::no(expr)),
    };
    let Ok(from) = operand.get_type(schema) else { return Ok(Transformed::no(expr)) };
    let legacy = mode == EvalMode::Legacy && !tolerant && !never_fails(&from, &to);
    if legacy && is_legacy_integral_cast(&from, &to) {
        return Ok(Transformed::yes(legacy_integral_cast(operand.clone(), &to)?));
    }
    let tolerant = tolerant || legacy;
    let recast = |value: Expr, to: DataType| match tolerant {
        true => Expr::TryCast(TryCast::new(Box::new(value), to)),
        false => Expr::Cast(Cast::new(Box::new(value), to)),
    };
    let conversion = |conversion: Conversion| conversion.udf(tolerant).call(vec![operand.clone()]);
    let string = |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    if string(&from)
        && let Some(read) = cast_from_string(operand.clone(), &to, tolerant)
    {
        return Ok(Transformed::yes(read));
    }
    Ok(Transformed::yes(match (&from, &to) {
        (DataType::Timestamp(..), t) if t.is_numeric() => {
            let seconds = match t {
                t if t.is_integer() => conversion(Conversion::WholeSeconds),
                t if t.is_decimal() => conversion(Conversion::ExactSeconds),
                _ => conversion(Conversion::Seconds),
            };
            recast(seconds, to)
        }
        (f, DataType::Timestamp(_, zone)) if f.is_numeric() => {
            let micros = conversion(Conversion::FromSeconds);
            recast(micros, DataType::Timestamp(TimeUnit::Microsecond, zone.clone()))
        }
        (DataType::Timestamp(..), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            recast(conversion(Conversion::Text), to)
        }
        (DataType::Float32 | DataType::Float64, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            recast(conversion(Conversion::FloatText), to)
        }
        (DataType::Float32 | DataType::Float64, t) if t.is_decimal() => recast(conversion(Conversion::DecimalText), to),
        (DataType::Decimal128(..), DataType::Float64) => recast(conversion(Conversion::ExactDouble), to),
        (f, DataType::Boolean) if f.is_decimal() => {
            operand.clone().not_eq(Expr::Cast(Cast::new(Box::new(lit(0i64)), f.clone())))
        }
        (DataType::Boolean, t) if t.is_decimal() => {
            let one_or_zero = when(operand.clone(), lit(1i64)).when(operand.clone().is_false(), lit(0i64)).end()?;
            recast(one_or_zero, to)
        }
        // Legacy mode's casts that ANSI mode refuses: a DATE is no number and no BOOLEAN, and
        // a BOOLEAN is one microsecond or none.
        (DataType::Date32 | DataType::Date64, t) if legacy && (t.is_numeric() || *t == DataType::Boolean) => {
            Expr::Literal(ScalarValue::try_from(t)?, None)
        }
        (DataType::Boolean, DataType::Timestamp(_, zone)) if legacy => {
            let micros = when(operand.clone(), lit(1i64)).when(operand.clone().is_false(), lit(0i64)).end()?;
            Expr::Cast(Cast::new(Box::new(micros), DataType::Timestamp(TimeUnit::Microsecond, zone.clone())))
        }
        (DataType::Timestamp(..), DataType::Boolean) if legacy => {
            let micros = Expr::Cast(Cast::new(Box::new(operand.clone()), DataType::Int64));
            micros.not_eq(lit(0i64))
        }
        (f, t) if refused(f, t) => {
            // Spark's subclass: a function to use instead, the ANSI setting, or neither for `try_cast`.
            let subclass = match (f.is_numeric() || t.is_numeric(), tolerant) {
                (true, _) => "CAST_WITH_FUNC_SUGGESTION",
                (false, false) => "CAST_WITH_CONF_SUGGESTION",
                (false, true) => "CAST_WITHOUT_SUGGESTION",
            };
            let mismatch = cast_type_mismatch(subclass, &f.to_string(), &t.to_string());
            return Err(DataFusionError::External(Box::new(mismatch)));
        }
        _ if legacy => Expr::TryCast(TryCast::new(Box::new(operand.clone()), to)),
        _ => return Ok(Transformed::no(expr)),
    }))
}

/// The casts Spark's `Cast.canAnsiCast` refuses, which Arrow would carry out: between a DATE
/// and a number, and from a DATE or TIMESTAMP to BOOLEAN and back.
fn refused(from: &DataType, to: &DataType) -> bool {
    let number = DataType::is_numeric;
    let date = |t: &DataType| matches!(t, DataType::Date32 | DataType::Date64);
    let datetime = |t: &DataType| date(t) || matches!(t, DataType::Timestamp(..));
    (date(from) && number(to))
        || (number(from) && date(to))
        || (datetime(from) && *to == DataType::Boolean)
        || (*from == DataType::Boolean && datetime(to))
}

/// What one of the rule's functions converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Conversion {
    /// A TIMESTAMP to its seconds since 1970, rounded down (a BIGINT).
    WholeSeconds,
    /// A TIMESTAMP to its seconds since 1970, with the fraction (a DOUBLE).
    Seconds,
    /// A TIMESTAMP to its seconds since 1970, with the fraction (a DECIMAL(38, 6)).
    ExactSeconds,
    /// Seconds since 1970 to microseconds (a BIGINT), a number's TIMESTAMP.
    FromSeconds,
    /// A TIMESTAMP as Spark prints it.
    Text,
    /// A FLOAT or DOUBLE as Java prints it (`1.0E7`, `0.001`, `NaN`).
    FloatText,
    /// A FLOAT or DOUBLE as the shortest decimal that reads back as it (`688.25`, `0.0000001`),
    /// NULL for NaN and the infinities: Spark casts a DOUBLE to a DECIMAL through that decimal
    /// (`BigDecimal(d.toString)`), where Arrow multiplies in binary (688.249999999999934464).
    DecimalText,
    /// A DECIMAL as the DOUBLE nearest to it, as Java's `BigDecimal.doubleValue`, which Spark's
    /// `Decimal.toDouble` is. Arrow divides the unscaled value, rounded to a DOUBLE, by a power
    /// of ten, itself rounded past 10^22: one rounding too many.
    ExactDouble,
}

const ALL_CONVERSIONS: [Conversion; 8] = [
    Conversion::WholeSeconds,
    Conversion::Seconds,
    Conversion::ExactSeconds,
    Conversion::FromSeconds,
    Conversion::Text,
    Conversion::FloatText,
    Conversion::DecimalText,
    Conversion::ExactDouble,
];

/// Whether `function` is one of the conversions a Spark cast becomes, which Spark's plans show
/// as the cast alone.
pub fn is_cast_conversion(function: &str) -> bool {
    ALL_CONVERSIONS.iter().any(|conversion| conversion.name() == function)
}

/// Each conversion's function, failing on values that do not fit, then each returning NULL.
static CONVERSIONS: LazyLock<Vec<Arc<ScalarUDF>>> = LazyLock::new(|| {
    [false, true]
        .into_iter()
        .flat_map(|tolerant| {
            ALL_CONVERSIONS.map(|c| Arc::new(ScalarUDF::new_from_impl(TimestampConversion::new(c, tolerant))))
        })
        .collect()
});

impl Conversion {
    fn name(self) -> &'static str {
        match self {
            Conversion::WholeSeconds | Conversion::Seconds | Conversion::ExactSeconds => "timestamp_seconds",
            Conversion::FromSeconds => "seconds_timestamp",
            Conversion::Text => "timestamp_text",
            Conversion::FloatText => "float_text",
            Conversion::DecimalText => "float_decimal_text",
            Conversion::ExactDouble => "decimal_double",
        }
    }

    fn udf(self, tolerant: bool) -> Arc<ScalarUDF> {
        let index = self as usize + if tolerant { ALL_CONVERSIONS.len() } else { 0 };
        Arc::clone(&CONVERSIONS[index])
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampConversion {
    conversion: Conversion,
    /// NULL where the value does not fit, as in `try_cast`, instead of an error.
    tolerant: bool,
    signature: Signature,
}

impl TimestampConversion {
    fn new(conversion: Conversion, tolerant: bool) -> Self {
        TimestampConversion { conversion, tolerant, signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for TimestampConversion {
    fn name(&self) -> &str {
        self.conversion.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match self.conversion {
            Conversion::WholeSeconds | Conversion::FromSeconds => DataType::Int64,
            Conversion::Seconds | Conversion::ExactDouble => DataType::Float64,
            Conversion::ExactSeconds => DataType::Decimal128(38, 6),
            Conversion::Text | Conversion::FloatText | Conversion::DecimalText => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = input_column(&args.args[0])?;
        let converted: ArrayRef = match self.conversion {
            Conversion::WholeSeconds => {
                let micros = micros_of(&value)?;
                Arc::new(
                    micros
                        .as_primitive::<TimestampMicrosecondType>()
                        .unary::<_, Int64Type>(|us| us.div_euclid(MICROS_PER_SECOND)),
                )
            }
            Conversion::Seconds => {
                let micros = micros_of(&value)?;
                Arc::new(
                    micros
                        .as_primitive::<TimestampMicrosecondType>()
                        .unary::<_, Float64Type>(|us| us as f64 / MICROS_PER_SECOND as f64),
                )
            }
            Conversion::ExactSeconds => {
                let micros = cast(&micros_of(&value)?, &DataType::Int64)?;
                let unscaled = cast(&micros, &DataType::Decimal128(38, 0))?;
                let unscaled = unscaled.as_primitive::<Decimal128Type>().clone();
                Arc::new(unscaled.with_precision_and_scale(38, 6)?)
            }
            Conversion::FromSeconds => Arc::new(self.micros_of_seconds(&value)?),
            Conversion::Text => Arc::new(text_of(&value)?),
            Conversion::FloatText => Arc::new(float_text_of(&value)?),
            Conversion::DecimalText => {
                let doubles = cast(&value, &DataType::Float64)?;
                Arc::new(shortest_decimal_text(doubles.as_primitive::<Float64Type>()))
            }
            Conversion::ExactDouble => Arc::new(nearest_doubles(&value)?),
        };
        shaped_like(&args.args[0], converted)
    }
}

impl TimestampConversion {
    /// Microseconds of seconds given as any number; past a TIMESTAMP's range an error, or NULL.
    fn micros_of_seconds(&self, value: &ArrayRef) -> Result<Int64Array> {
        let seconds = cast(value, &DataType::Float64)?;
        let exact = cast(value, &DataType::Int64).ok().filter(|_| value.data_type().is_integer());
        let mut out = Vec::with_capacity(value.len());
        for row in 0..value.len() {
            if value.is_null(row) {
                out.push(None);
                continue;
            }
            let micros = match &exact {
                Some(whole) => whole.as_primitive::<Int64Type>().value(row).checked_mul(MICROS_PER_SECOND),
                None => {
                    let micros = seconds.as_primitive::<Float64Type>().value(row) * MICROS_PER_SECOND as f64;
                    (micros.is_finite() && micros.abs() < i64::MAX as f64).then_some(micros as i64)
                }
            };
            match (micros, self.tolerant) {
                (Some(micros), _) => out.push(Some(micros)),
                (None, true) => out.push(None),
                (None, false) => {
                    return Err(SqlError::new(
                        "22003",
                        "[ARITHMETIC_OVERFLOW] long overflow. Use 'try_cast' to tolerate overflow and return NULL instead.",
                    ).into());
                }
            }
        }
        Ok(Int64Array::from(out))
    }
}

/// `value`'s timestamps in microseconds, their time zone kept.
fn micros_of(value: &ArrayRef) -> Result<ArrayRef> {
    match value.data_type() {
        DataType::Timestamp(_, zone) => Ok(cast(value, &DataType::Timestamp(TimeUnit::Microsecond, zone.clone()))?),
        other => plan_err!("{other} is not a TIMESTAMP"),
    }
}

/// Spark's text of each timestamp: `yyyy-MM-dd HH:mm:ss`, then the fraction without its
/// trailing zeros, if any, in the timestamp's time zone.
fn text_of(value: &ArrayRef) -> Result<StringArray> {
    let micros = micros_of(value)?;
    let zone: Tz = match micros.data_type() {
        DataType::Timestamp(_, Some(zone)) => zone.parse()?,
        _ => "+00:00".parse()?,
    };
    Ok(micros
        .as_primitive::<TimestampMicrosecondType>()
        .iter()
        .map(|us| {
            let time = chrono::DateTime::from_timestamp_micros(us?)?.with_timezone(&zone);
            let whole = time.format("%Y-%m-%d %H:%M:%S").to_string();
            let fraction = us?.rem_euclid(MICROS_PER_SECOND);
            Some(match fraction {
                0 => whole,
                f => format!("{whole}.{}", format!("{f:06}").trim_end_matches('0')),
            })
        })
        .collect())
}

/// Each DECIMAL as the DOUBLE nearest to it (Java's `BigDecimal.doubleValue`); other numbers
/// as Arrow casts them (a rewrite of a set operation may have made the value a DOUBLE already).
pub fn nearest_doubles(numbers: &ArrayRef) -> Result<Float64Array> {
    match numbers.data_type() {
        DataType::Decimal128(_, scale) => {
            let scale = *scale;
            Ok(numbers.as_primitive::<Decimal128Type>().unary(|unscaled| nearest_double(unscaled, scale)))
        }
        _ => Ok(cast(numbers, &DataType::Float64)?.as_primitive::<Float64Type>().clone()),
    }
}

/// `unscaled` × 10^-`scale` rounded once to a DOUBLE: by one division where both operands are
/// exact DOUBLEs (as Java's fast path), else by reading its digits.
fn nearest_double(unscaled: i128, scale: i8) -> f64 {
    const EXACT_POWERS: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ];
    match usize::try_from(scale).ok().and_then(|scale| EXACT_POWERS.get(scale)) {
        Some(power) if unscaled.unsigned_abs() < 1 << f64::MANTISSA_DIGITS => unscaled as f64 / power,
        _ => format!("{unscaled}e{}", -i32::from(scale)).parse().unwrap_or(f64::NAN),
    }
}

/// Each DOUBLE as the shortest decimal that reads back as it, NULL for NaN and the
/// infinities: the text Spark's `Decimal(d)` (`BigDecimal(d.toString)`) reads.
pub fn shortest_decimal_text(doubles: &Float64Array) -> StringArray {
    doubles.iter().map(|d| d.filter(|d| d.is_finite()).map(|d| d.to_string())).collect()
}

/// Java's `Double.toString` (or `Float.toString`, for a FLOAT) of each value.
fn float_text_of(value: &ArrayRef) -> Result<StringArray> {
    Ok(match value.data_type() {
        DataType::Float32 => {
            value.as_primitive::<Float32Type>().iter().map(|x| x.map(|x| java_text(x, format!("{x:e}")))).collect()
        }
        _ => {
            let doubles = cast(value, &DataType::Float64)?;
            doubles.as_primitive::<Float64Type>().iter().map(|x| x.map(|x| java_text(x, format!("{x:e}")))).collect()
        }
    })
}

/// Java's text of a number whose shortest digits Rust printed as `scientific` (`1.5e7`):
/// plain with at least one fraction digit from 10^-3 up to 10^7, else `d.dddE±n`.
fn java_text(x: impl Into<f64>, scientific: String) -> String {
    let x: f64 = x.into();
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let Some((mantissa, exponent)) = scientific.trim_start_matches('-').split_once('e') else { return scientific };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    if (-3..7).contains(&exponent) {
        let (whole, fraction) = if exponent >= 0 {
            let split = exponent as usize + 1;
            let padded = format!("{digits:0<split$}");
            (padded[..split].to_string(), padded[split..].to_string())
        } else {
            ("0".to_string(), format!("{}{digits}", "0".repeat((-exponent - 1) as usize)))
        };
        let fraction = if fraction.is_empty() { "0".to_string() } else { fraction };
        format!("{sign}{whole}.{fraction}")
    } else {
        let fraction = if digits.len() > 1 { &digits[1..] } else { "0" };
        format!("{sign}{}.{fraction}E{exponent}", &digits[..1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::TimestampMicrosecondArray;

    /// The nearest DOUBLEs, as Python's `float(Decimal(...))` gives them, where Arrow's cast
    /// gives the next one: 5.717163598260795e-05 and 514574858076820.8.
    #[test]
    fn decimals_become_their_nearest_doubles() {
        assert_eq!(nearest_double(57171635982607948077, 24), 5.7171635982607945e-05);
        assert_eq!(nearest_double(51457485807682078, 2), 514574858076820.75);
        assert_eq!(nearest_double(-125, 2), -1.25);
        assert_eq!(nearest_double(i128::MAX, 0), 1.7014118346046923e38);
    }

    /// Java 17's `Double.toString`, which Spark prints DOUBLEs with.
    #[test]
    fn doubles_print_as_java_prints_them() {
        let text = |x: f64| java_text(x, format!("{x:e}"));
        assert_eq!(text(1e7), "1.0E7");
        assert_eq!(text(12345678.9), "1.23456789E7");
        assert_eq!(text(1234567.0), "1234567.0");
        assert_eq!(text(0.001), "0.001");
        assert_eq!(text(0.0001), "1.0E-4");
        assert_eq!(text(-2.5), "-2.5");
        assert_eq!(text(100.0), "100.0");
        assert_eq!(text(-0.0), "-0.0");
        assert_eq!(text(f64::NAN), "NaN");
        assert_eq!(text(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(text(1.7976931348623157e308), "1.7976931348623157E308");
    }

    #[test]
    fn timestamps_print_as_spark_prints_them() {
        let micros: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![
                Some(1_709_633_472_000_000),
                Some(1_709_633_472_500_000),
                Some(-1),
                None,
            ])
            .with_timezone("UTC"),
        );
        let text = text_of(&micros).unwrap();
        assert_eq!(text.value(0), "2024-03-05 10:11:12");
        assert_eq!(text.value(1), "2024-03-05 10:11:12.5");
        assert_eq!(text.value(2), "1969-12-31 23:59:59.999999");
        assert!(text.is_null(3));
    }
}
