//! Spark's `Cast` to TINYINT, SMALLINT, INT or BIGINT under legacy mode
//! (`spark.sql.ansi.enabled = false`), where it converts as Java does rather than failing:
//!
//! - an integer narrows by keeping its low bits (`CAST(300 AS TINYINT)` is 44);
//! - a FLOAT or DOUBLE rounds toward zero and saturates at INT's range (BIGINT's for a BIGINT),
//!   NaN giving 0, then narrows (`CAST(1e10 AS SMALLINT)` is -1);
//! - a DECIMAL drops its fraction and keeps the low 64 bits, then narrows (`Decimal.toLong`);
//! - a string is read as `UTF8String.toInt` reads it: trimmed, an optional sign, digits, and a
//!   fraction that is dropped (`' 1.9 '` is 1); anything else, or a value past the type, is NULL.
//!
//! [`SparkCasts`](super::spark_casts) makes such casts this function; its other casts become
//! NULL-giving ones in that mode.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int8Array, Int16Array, Int32Array, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, lit,
};

use super::infer_filters_from_constraints::widens;
use crate::exec::columnar::{input_column, shaped_like};

/// Whether legacy mode casts `from` to `to` with [`legacy_integral_cast`].
pub fn is_legacy_integral_cast(from: &DataType, to: &DataType) -> bool {
    let string = matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    to.is_signed_integer() && (string || from.is_numeric() || *from == DataType::Boolean)
}

/// Whether every value of `from` has a value of `to`, so that the cast stays one that fails
/// (and stays visible to the rules that look through casts, as pruning does): a widening cast
/// ([`widens`]), a DECIMAL into a wider DECIMAL or a floating type, and anything into a string.
pub fn never_fails(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (_, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => true,
        (DataType::Decimal128(..), t) if t.is_floating() => true,
        (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) => {
            s2 >= s1 && i16::from(*p2) - i16::from(*s2) >= i16::from(*p1) - i16::from(*s1)
        }
        _ => widens(from, to),
    }
}

/// `value` cast to `to` as Spark's legacy mode casts it. The target type travels as a typed
/// NULL, the function's second argument.
pub fn legacy_integral_cast(value: Expr, to: &DataType) -> Result<Expr> {
    let target = lit(ScalarValue::try_from(to)?);
    Ok(LEGACY_INTEGRAL_CAST_UDF.call(vec![value, target]))
}

const LEGACY_INTEGRAL_CAST: &str = "legacy_integral_cast";

static LEGACY_INTEGRAL_CAST_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(LegacyIntegralCast { signature: Signature::any(2, Volatility::Immutable) }))
});

#[derive(Debug, PartialEq, Eq, Hash)]
struct LegacyIntegralCast {
    signature: Signature,
}

impl ScalarUDFImpl for LegacyIntegralCast {
    fn name(&self) -> &str {
        LEGACY_INTEGRAL_CAST
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [_, target] => Ok(target.clone()),
            _ => exec_err!("{LEGACY_INTEGRAL_CAST} takes a value and its target type"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = input_column(&args.args[0])?;
        let to = args.return_field.data_type();
        let longs = java_longs(&value, to)?;
        let narrowed: ArrayRef = match to {
            DataType::Int8 => Arc::new(longs.iter().map(|v| v.map(|v| v as i8)).collect::<Int8Array>()),
            DataType::Int16 => Arc::new(longs.iter().map(|v| v.map(|v| v as i16)).collect::<Int16Array>()),
            DataType::Int32 => Arc::new(longs.iter().map(|v| v.map(|v| v as i32)).collect::<Int32Array>()),
            DataType::Int64 => Arc::new(longs),
            other => return exec_err!("{LEGACY_INTEGRAL_CAST} to {other}"),
        };
        shaped_like(&args.args[0], narrowed)
    }
}

/// Each value as the Java `long` that narrowing to `to` takes its low bits from.
fn java_longs(value: &ArrayRef, to: &DataType) -> Result<Int64Array> {
    Ok(match value.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = cast(value, &DataType::Utf8)?;
            let (least, most) = integral_range(to);
            text.as_string::<i32>()
                .iter()
                .map(|s| s.and_then(legacy_integer).filter(|v| (least..=most).contains(v)).map(|v| v as i64))
                .collect()
        }
        DataType::Float32 | DataType::Float64 => {
            let doubles = cast(value, &DataType::Float64)?;
            let long_target = *to == DataType::Int64;
            // Rust's `as` rounds toward zero, saturates and takes NaN to 0, as Java's does.
            doubles
                .as_primitive::<Float64Type>()
                .iter()
                .map(|d| d.map(|d| if long_target { d as i64 } else { i64::from(d as i32) }))
                .collect()
        }
        DataType::Decimal128(_, scale) => {
            let unit = 10i128.pow(u32::from(scale.unsigned_abs()));
            value.as_primitive::<Decimal128Type>().iter().map(|v| v.map(|v| (v / unit) as i64)).collect()
        }
        _ => cast(value, &DataType::Int64)?.as_primitive::<Int64Type>().clone(),
    })
}

/// The least and greatest values of the integer type `to`.
fn integral_range(to: &DataType) -> (i128, i128) {
    match to {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    }
}

/// `text` read as `UTF8String.toLong` reads it outside ANSI mode: trimmed of whitespace and
/// control characters, an optional sign, digits, and an optional fraction of digits that is
/// dropped; `None` for anything else or past 128 bits.
fn legacy_integer(text: &str) -> Option<i128> {
    let text = text.trim_matches(|c: char| c <= ' ');
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    // A separator may stand alone: `'.5'` and `'-.'` are 0.
    let (whole, fraction) = match unsigned.split_once('.') {
        Some(parts) => parts,
        None if unsigned.is_empty() => return None,
        None => (unsigned, ""),
    };
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = whole.bytes().try_fold(0i128, |n, b| n.checked_mul(10)?.checked_add(i128::from(b - b'0')))?;
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3 with `spark.sql.ansi.enabled = false`: `CAST(' 1.9 ' AS BIGINT)` is 1,
    /// `CAST('-1.9' AS INT)` -1, `CAST('+5' AS TINYINT)` 5, `CAST('.5' AS INT)` 0,
    /// `CAST('5.' AS INT)` 5; `'1e3'`, `'abc'` and `''` are NULL.
    #[test]
    fn strings_read_as_spark_reads_them_outside_ansi_mode() {
        assert_eq!(legacy_integer(" 1.9 "), Some(1));
        assert_eq!(legacy_integer(".5"), Some(0));
        assert_eq!(legacy_integer("5."), Some(5));
        assert_eq!(legacy_integer("-1.9"), Some(-1));
        assert_eq!(legacy_integer("+5"), Some(5));
        for text in ["1e3", "abc", "", "-", "1.2.3", " 1 2"] {
            assert_eq!(legacy_integer(text), None, "{text}");
        }
    }

    /// Spark 4.3, legacy mode: `CAST(1e10 AS SMALLINT)` is -1, `CAST(1e20 AS BIGINT)`
    /// 9223372036854775807, `CAST(-1e20 AS INT)` -2147483648, NaN 0, and
    /// `CAST(CAST(3e10 AS DECIMAL(12,0)) AS INT)` -64771072.
    #[test]
    fn numbers_narrow_as_java_narrows_them() {
        let doubles: ArrayRef =
            Arc::new(datafusion::arrow::array::Float64Array::from(vec![1e10, 1e20, -1e20, f64::NAN]));
        let as_long = java_longs(&doubles, &DataType::Int64).unwrap();
        assert_eq!(as_long.value(1), i64::MAX);
        let as_int = java_longs(&doubles, &DataType::Int16).unwrap();
        assert_eq!(as_int.value(0) as i16, -1);
        assert_eq!(as_int.value(2) as i32, i32::MIN);
        assert_eq!(as_int.value(3), 0);
        let decimals: ArrayRef = Arc::new(
            datafusion::arrow::array::Decimal128Array::from(vec![30_000_000_000i128])
                .with_precision_and_scale(12, 0)
                .unwrap(),
        );
        assert_eq!(java_longs(&decimals, &DataType::Int32).unwrap().value(0) as i32, -64771072);
    }
}
