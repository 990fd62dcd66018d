//! Spark's `Cast` (`Cast.scala`, ANSI mode) where DataFusion's converts otherwise:
//!
//! - a TIMESTAMP cast to a number counts seconds since 1970 (an integer rounded down, a DOUBLE
//!   or DECIMAL with the fraction), and a number cast to TIMESTAMP is read as seconds; Arrow
//!   counts in the timestamp's own unit, microseconds here;
//! - a TIMESTAMP cast to a string is `yyyy-MM-dd HH:mm:ss` in the session's time zone, with the
//!   fraction of a second only where there is one and without trailing zeros; Arrow's has a `T`
//!   and the zone;
//! - a DECIMAL cast to BOOLEAN is whether it is not 0, and a BOOLEAN cast to DECIMAL is 1 or 0,
//!   where Arrow has no such casts;
//! - a DATE cast to a number is refused (`42K09`), where Arrow gives the days since 1970.
//!
//! Runs after DataFusion's type coercion, which has made implicit conversions casts too: those
//! are Spark's casts as well. A TIMESTAMP past a BIGINT's seconds, or seconds past a
//! TIMESTAMP's range, fail with `22003` (NULL in `try_cast`).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, lit, when,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule::rewrite_expressions;
use crate::error::SqlError;
use crate::exec::columnar::shaped_like;

const MICROS_PER_SECOND: i64 = 1_000_000;

#[derive(Debug, Default)]
pub struct SparkCasts;

impl AnalyzerRule for SparkCasts {
    fn name(&self) -> &str {
        "spark_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, spark_cast)
    }
}

fn spark_cast(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (operand, to, tolerant) = match &expr {
        Expr::Cast(Cast { expr, field }) => (expr.as_ref(), field.data_type().clone(), false),
        Expr::TryCast(TryCast { expr, field }) => (expr.as_ref(), field.data_type().clone(), true),
        _ => return Ok(Transformed::no(expr)),
    };
    let Ok(from) = operand.get_type(schema) else { return Ok(Transformed::no(expr)) };
    let recast = |value: Expr, to: DataType| match tolerant {
        true => Expr::TryCast(TryCast::new(Box::new(value), to)),
        false => Expr::Cast(Cast::new(Box::new(value), to)),
    };
    let conversion = |conversion: Conversion| conversion.udf(tolerant).call(vec![operand.clone()]);
    Ok(Transformed::yes(match (&from, &to) {
        (DataType::Timestamp(..), t) if t.is_integer() || t.is_floating() || t.is_decimal() => {
            let seconds = match t {
                t if t.is_integer() => conversion(Conversion::WholeSeconds),
                t if t.is_decimal() => conversion(Conversion::ExactSeconds),
                _ => conversion(Conversion::Seconds),
            };
            recast(seconds, to)
        }
        (f, DataType::Timestamp(_, zone)) if f.is_integer() || f.is_floating() || f.is_decimal() => {
            let micros = conversion(Conversion::FromSeconds);
            recast(micros, DataType::Timestamp(TimeUnit::Microsecond, zone.clone()))
        }
        (DataType::Timestamp(..), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            recast(conversion(Conversion::Text), to)
        }
        (f, DataType::Boolean) if f.is_decimal() => {
            operand.clone().not_eq(Expr::Cast(Cast::new(Box::new(lit(0i64)), f.clone())))
        }
        (DataType::Boolean, t) if t.is_decimal() => {
            let one_or_zero = when(operand.clone(), lit(1i64)).when(operand.clone().is_false(), lit(0i64)).end()?;
            recast(one_or_zero, to)
        }
        (DataType::Date32 | DataType::Date64, t) if t.is_integer() || t.is_floating() || t.is_decimal() => {
            return Err(DataFusionError::External(Box::new(SqlError::new(
                "42K09",
                format!(
                    "[DATATYPE_MISMATCH.CAST_WITH_FUNC_SUGGESTION] Cannot resolve the cast due to data type mismatch: cannot cast \"DATE\" to \"{}\". To convert values from \"DATE\" to \"{}\", you can use the functions `UNIX_DATE` instead.",
                    spark_name(t),
                    spark_name(t)
                ),
            ))));
        }
        _ => return Ok(Transformed::no(expr)),
    }))
}

fn spark_name(t: &DataType) -> String {
    match t {
        DataType::Int8 => "TINYINT".to_string(),
        DataType::Int16 => "SMALLINT".to_string(),
        DataType::Int32 => "INT".to_string(),
        DataType::Int64 => "BIGINT".to_string(),
        DataType::Float32 => "FLOAT".to_string(),
        DataType::Float64 => "DOUBLE".to_string(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        other => other.to_string().to_uppercase(),
    }
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
}

const ALL_CONVERSIONS: [Conversion; 5] = [
    Conversion::WholeSeconds,
    Conversion::Seconds,
    Conversion::ExactSeconds,
    Conversion::FromSeconds,
    Conversion::Text,
];

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
        match self.conversion {
            Conversion::WholeSeconds | Conversion::Seconds | Conversion::ExactSeconds => "timestamp_seconds",
            Conversion::FromSeconds => "seconds_timestamp",
            Conversion::Text => "timestamp_text",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match self.conversion {
            Conversion::WholeSeconds | Conversion::FromSeconds => DataType::Int64,
            Conversion::Seconds => DataType::Float64,
            Conversion::ExactSeconds => DataType::Decimal128(38, 6),
            Conversion::Text => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = args.args[0].to_array(args.number_rows)?;
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
                    return Err(DataFusionError::External(Box::new(SqlError::new(
                        "22003",
                        "[ARITHMETIC_OVERFLOW] long overflow. Use 'try_cast' to tolerate overflow and return NULL instead.",
                    ))));
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::TimestampMicrosecondArray;

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
