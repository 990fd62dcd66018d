//! Spark's `round` (half up) and `bround` (half even), `RoundBase` in `mathExpressions.scala`.
//!
//! A DECIMAL(p, s) rounded to `d` places is DECIMAL(min(p - s + 1 + min(s, d), 38), min(s, d))
//! for `d >= 0`, and DECIMAL(min(max(p - s + 1, 1 - d), 38), 0) for `d < 0`: one more integral
//! digit for the carry, and no more fractional digits than the input had. A DOUBLE is rounded as
//! the decimal Java prints it (`round(2.675, 2)` is 2.68, not the 2.67 its binary value would
//! give); an integer keeps its type and is rounded only for `d < 0`. `d` must be a constant,
//! as Spark requires.
//!
//! An integer whose rounding overflows its type fails with `22003`, as under Spark's ANSI mode;
//! under legacy mode (`spark.sql.ansi.enabled = false`) it wraps around, and a DECIMAL past its
//! type is NULL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, PrimitiveArray};
use datafusion::arrow::datatypes::{
    ArrowNativeType, ArrowPrimitiveType, DataType, Decimal128Type, Field, FieldRef, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type,
};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::config::EvalMode;
use crate::error::SqlError;
use crate::exec::columnar::{input_column, shaped_like};

const MAX_PRECISION: u8 = 38;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    HalfUp,
    HalfEven,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkRound {
    name: &'static str,
    mode: Mode,
    signature: Signature,
}

pub fn spark_round() -> ScalarUDF {
    ScalarUDF::new_from_impl(SparkRound::new("round", Mode::HalfUp))
}

pub fn spark_bround() -> ScalarUDF {
    ScalarUDF::new_from_impl(SparkRound::new("bround", Mode::HalfEven))
}

impl SparkRound {
    fn new(name: &'static str, mode: Mode) -> Self {
        SparkRound { name, mode, signature: Signature::user_defined(Volatility::Immutable) }
    }
}

/// The type `input` has rounded to `places`.
fn rounded_type(input: &DataType, places: i32) -> DataType {
    match *input {
        DataType::Decimal128(p, s) => {
            let integral = i32::from(p) - i32::from(s) + 1;
            let (precision, scale) = if places < 0 {
                (integral.max(1 - places), 0)
            } else {
                (integral + places.min(i32::from(s)), places.min(i32::from(s)))
            };
            DataType::Decimal128(precision.min(i32::from(MAX_PRECISION)) as u8, scale as i8)
        }
        ref other => other.clone(),
    }
}

impl ScalarUDFImpl for SparkRound {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let value = match arg_types.first() {
            Some(t @ (DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64)) => t.clone(),
            Some(t @ (DataType::Float32 | DataType::Float64)) => t.clone(),
            Some(DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s)) => {
                DataType::Decimal128(*p, *s)
            }
            Some(DataType::UInt8 | DataType::UInt16 | DataType::UInt32) => DataType::Int64,
            Some(DataType::Null) => DataType::Float64,
            Some(t) if t.is_numeric() => DataType::Float64,
            Some(other) => return plan_err!("{} of {other} is not supported", self.name),
            None => return plan_err!("{} takes one or two arguments", self.name),
        };
        match arg_types.len() {
            1 => Ok(vec![value]),
            // Kept as it is: a cast would hide the constant the return type is read from.
            2 if arg_types[1].is_integer() => Ok(vec![value, arg_types[1].clone()]),
            2 if arg_types[1] == DataType::Null => Ok(vec![value, DataType::Int32]),
            2 => plan_err!("the scale of {} must be an integer, not {}", self.name, arg_types[1]),
            _ => plan_err!("{} takes one or two arguments", self.name),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Err(DataFusionError::Internal("return_field_from_args answers".to_string()))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let places = places_of(args.scalar_arguments.get(1).copied().flatten(), args.arg_fields.len(), self.name)?;
        let input = args.arg_fields[0].data_type();
        Ok(Arc::new(Field::new(self.name, rounded_type(input, places), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let places = match args.args.get(1) {
            Some(ColumnarValue::Scalar(scalar)) => places_of(Some(scalar), 2, self.name)?,
            Some(ColumnarValue::Array(_)) => return plan_err!("the scale of {} must be a constant", self.name),
            None => 0,
        };
        let value = input_column(&args.args[0])?;
        let eval = EvalMode::of(&args.config_options);
        let rounded = round_array(&value, places, (self.mode, eval), args.return_field.data_type())?;
        shaped_like(&args.args[0], rounded)
    }
}

fn places_of(scale: Option<&ScalarValue>, arg_count: usize, name: &str) -> Result<i32> {
    match (arg_count, scale) {
        (1, _) => Ok(0),
        (_, Some(ScalarValue::Int32(Some(places)))) => Ok(*places),
        (_, Some(ScalarValue::Int32(None) | ScalarValue::Null)) => Ok(0),
        (_, Some(other)) => other.cast_to(&DataType::Int32).and_then(|s| places_of(Some(&s), arg_count, name)),
        (_, None) => plan_err!("the scale of {name} must be a constant"),
    }
}

/// `value` rounded to `places` as `mode` rounds; past the output type an error, or under
/// legacy mode NULL (a DECIMAL) or the integer wrapped around, as Spark's legacy mode has them.
fn round_array(value: &ArrayRef, places: i32, (mode, eval): (Mode, EvalMode), output: &DataType) -> Result<ArrayRef> {
    let legacy = eval == EvalMode::Legacy;
    Ok(match (value.data_type(), output) {
        (DataType::Decimal128(_, scale), DataType::Decimal128(precision, out_scale)) => {
            let decimals = value.as_primitive::<Decimal128Type>();
            let limit = 10i128.pow(u32::from(*precision));
            let round = |v| round_decimal(v, i32::from(*scale), places, i32::from(*out_scale), mode);
            let rounded: Decimal128Array = match legacy {
                true => decimals.unary_opt(|v| round(v).filter(|r| r.abs() < limit)),
                false => decimals.try_unary(|v| {
                    round(v).filter(|r| r.abs() < limit).ok_or_else(|| out_of_range(*precision, *out_scale))
                })?,
            };
            Arc::new(rounded.with_precision_and_scale(*precision, *out_scale)?)
        }
        (DataType::Float64, _) => Arc::new(floats::<Float64Type>(value, |x| round_double(x, places, mode))),
        (DataType::Float32, _) => {
            Arc::new(floats::<Float32Type>(value, |x| round_double(f64::from(x), places, mode) as f32))
        }
        (DataType::Int64, _) => integers::<Int64Type>(value, places, mode, legacy)?,
        (DataType::Int32, _) => integers::<Int32Type>(value, places, mode, legacy)?,
        (DataType::Int16, _) => integers::<Int16Type>(value, places, mode, legacy)?,
        (DataType::Int8, _) => integers::<Int8Type>(value, places, mode, legacy)?,
        (other, _) => return exec_err!("round of {other} is not supported"),
    })
}

fn out_of_range(precision: u8, scale: i8) -> DataFusionError {
    SqlError::new(
        "22003",
        format!(
            "[NUMERIC_VALUE_OUT_OF_RANGE] the rounded value cannot be represented as Decimal({precision}, {scale})"
        ),
    )
    .into()
}

fn floats<T: ArrowPrimitiveType>(value: &ArrayRef, f: impl Fn(T::Native) -> T::Native) -> PrimitiveArray<T> {
    value.as_primitive::<T>().unary(f)
}

fn integers<T>(value: &ArrayRef, places: i32, mode: Mode, wrap: bool) -> Result<ArrayRef>
where
    T: ArrowPrimitiveType,
    T::Native: Into<i128> + TryFrom<i128>,
{
    if places >= 0 {
        return Ok(Arc::clone(value));
    }
    let rounded: PrimitiveArray<T> = value.as_primitive::<T>().try_unary(|v| {
        let r = round_decimal(v.into(), 0, places, 0, mode);
        // Wrapped: the low bits of the rounded value, as Java's narrowing keeps them.
        let wrapped = |r: i128| <T::Native as ArrowNativeType>::usize_as(r as i64 as usize);
        r.and_then(|r| if wrap { Some(wrapped(r)) } else { T::Native::try_from(r).ok() }).ok_or_else(|| {
            DataFusionError::from(SqlError::new(
                "22003",
                "[ARITHMETIC_OVERFLOW] overflow. Use 'try_round' to tolerate overflow and return NULL instead.",
            ))
        })
    })?;
    Ok(Arc::new(rounded))
}

/// `unscaled` × 10^-`scale` rounded to `places` decimals, as an unscaled value of `out_scale`;
/// `None` past i128.
fn round_decimal(unscaled: i128, scale: i32, places: i32, out_scale: i32, mode: Mode) -> Option<i128> {
    let dropped = scale - places;
    if dropped <= 0 {
        return unscaled.checked_mul(10i128.checked_pow((out_scale - scale).unsigned_abs())?);
    }
    let kept = if dropped > 38 { 0 } else { round_digits(unscaled, dropped as u32, mode) };
    // `kept` counts units of 10^-places; the result is unscaled to `out_scale`.
    let shift = out_scale - places;
    if shift >= 0 { kept.checked_mul(10i128.checked_pow(shift as u32)?) } else { Some(kept) }
}

/// `value` / 10^`digits`, rounded by `mode`.
fn round_digits(value: i128, digits: u32, mode: Mode) -> i128 {
    let Some(unit) = 10i128.checked_pow(digits) else { return 0 };
    let (quotient, remainder) = (value / unit, (value % unit).abs());
    let half = unit / 2;
    let up = match mode {
        Mode::HalfUp => remainder >= half,
        Mode::HalfEven => remainder > half || remainder == half && quotient % 2 != 0,
    };
    if up { quotient + value.signum() } else { quotient }
}

/// `x` rounded as Java's `BigDecimal(Double.toString(x))` would be. A BigDecimal has no
/// negative zero, so a zero comes back as 0.0.
fn round_double(x: f64, places: i32, mode: Mode) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // The shortest digits that read back as `x`: `digits` × 10^`exponent`.
    let printed = format!("{:e}", x.abs());
    let Some((mantissa, exponent)) = printed.split_once('e') else { return x };
    let Ok(exponent) = exponent.parse::<i32>() else { return x };
    let fraction_digits = mantissa.split_once('.').map_or(0, |(_, f)| f.len() as i32);
    let Ok(digits) = mantissa.replace('.', "").parse::<i128>() else { return x };
    let scale = fraction_digits - exponent;
    if scale <= places {
        return if x == 0.0 { 0.0 } else { x };
    }
    let dropped = (scale - places) as u32;
    let kept = if dropped > 38 { 0 } else { round_digits(digits, dropped, mode) };
    let rounded: f64 = format!("{kept}e{}", -places).parse().unwrap_or(x);
    if kept == 0 { 0.0 } else { rounded.copysign(x) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3's answers.
    #[test]
    fn doubles_round_as_their_printed_decimals() {
        assert_eq!(round_double(2.675, 2, Mode::HalfUp), 2.68);
        assert_eq!(round_double(2.5, 0, Mode::HalfUp), 3.0);
        assert_eq!(round_double(-2.5, 0, Mode::HalfUp), -3.0);
        assert_eq!(round_double(2.5, 0, Mode::HalfEven), 2.0);
        assert_eq!(round_double(3.5, 0, Mode::HalfEven), 4.0);
        assert_eq!(round_double(1234.5, -2, Mode::HalfUp), 1200.0);
        assert_eq!(round_double(1.0e-20, 2, Mode::HalfUp), 0.0);
        for (x, places, mode) in [(-0.0, 2, Mode::HalfUp), (-0.4, 0, Mode::HalfUp), (-2.5, -1, Mode::HalfEven)] {
            let rounded = round_double(x, places, mode);
            assert!(rounded == 0.0 && rounded.is_sign_positive(), "{x} gave {rounded}");
        }
        assert!(round_double(f64::NAN, 2, Mode::HalfUp).is_nan());
    }

    #[test]
    fn decimal_types_follow_round_base() {
        let d = |p, s| DataType::Decimal128(p, s);
        assert_eq!(rounded_type(&d(38, 4), 1), d(36, 1));
        assert_eq!(rounded_type(&d(3, 2), 3), d(4, 2));
        assert_eq!(rounded_type(&d(3, 3), -1), d(2, 0));
        assert_eq!(rounded_type(&d(38, 4), 2), d(37, 2));
        assert_eq!(rounded_type(&d(10, 2), 1), d(10, 1));
    }

    #[test]
    fn decimals_round_half_up_or_even() {
        // 1.25 to one place, as DECIMAL(3, 1).
        assert_eq!(round_decimal(125, 2, 1, 1, Mode::HalfUp), Some(13));
        assert_eq!(round_decimal(125, 2, 1, 1, Mode::HalfEven), Some(12));
        assert_eq!(round_decimal(-125, 2, 1, 1, Mode::HalfUp), Some(-13));
        // 1.25 to three places keeps scale 2.
        assert_eq!(round_decimal(125, 2, 3, 2, Mode::HalfUp), Some(125));
        // 155 to -1 places: 160.
        assert_eq!(round_decimal(155, 0, -1, 0, Mode::HalfUp), Some(160));
        assert_eq!(round_decimal(145, 0, -1, 0, Mode::HalfEven), Some(140));
    }
}
