//! Spark's `Divide` of DECIMALs (`Divide.resultDecimalType`): the quotient of DECIMAL(p1, s1) by
//! DECIMAL(p2, s2) has scale max(6, s1 + p2 + 1) and p1 - s1 + s2 integer digits, cut to 38
//! digits by giving up scale down to 6 (or, with
//! `spark.sql.decimalOperations.allowPrecisionLoss = false`, by taking half the excess from the
//! scale); it is rounded half up, where
//! DataFusion gives other types and truncates (`-1663.07 / 7` is -237.581429 in Spark,
//! -237.581428 in DataFusion). An integer operand counts as the DECIMAL holding its type
//! (INT as DECIMAL(10, 0)), an integer literal as the narrowest DECIMAL holding its value (7 as
//! DECIMAL(1, 0)), as Spark's `DecimalPrecision` takes them (where we differ: so does an
//! integer literal cast to INT, which Spark takes as an INT). A zero divisor fails with
//! DIVIDE_BY_ZERO (22012), and a quotient past its precision with NUMERIC_VALUE_OUT_OF_RANGE
//! (22003), as under ANSI mode; under legacy mode (`spark.sql.ansi.enabled = false`) both are
//! NULL. [`Division`](super::division) calls it for `/`. The DECIMAL types the other rules
//! share are here too: Spark's result types past 38 digits, an integer's DECIMAL, and the wider
//! DECIMAL of several.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, i256};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::config::{EvalMode, PrecisionLoss};
use crate::error::SqlError;

/// The function a DECIMAL `/` becomes.
pub const DECIMAL_DIVIDE: &str = "decimal_divide";

const MAX_PRECISION: u8 = 38;
/// Spark's `DecimalType.MINIMUM_ADJUSTED_SCALE`.
const MINIMUM_ADJUSTED_SCALE: i8 = 6;

/// `left / right` as Spark divides DECIMALs, when one of them is a DECIMAL and the other a
/// DECIMAL or an integer; `None` for other operands.
pub fn decimal_division(left: &Expr, right: &Expr, schema: &DFSchema, loss: PrecisionLoss) -> Result<Option<Expr>> {
    let Some(args) = decimal_operands(left, right, schema)? else { return Ok(None) };
    Ok(Some(DECIMAL_DIVIDE_UDFS[loss as usize].call(args)))
}

/// `left` and `right` as the DECIMALs Spark computes with, when one of them is a DECIMAL and
/// the other a DECIMAL or an integer; `None` for other operands.
pub fn decimal_operands(left: &Expr, right: &Expr, schema: &DFSchema) -> Result<Option<Vec<Expr>>> {
    let (left_type, right_type) = (left.get_type(schema)?, right.get_type(schema)?);
    if !left_type.is_decimal() && !right_type.is_decimal() {
        return Ok(None);
    }
    let (Some(l), Some(r)) = (operand_type(left, &left_type), operand_type(right, &right_type)) else {
        return Ok(None);
    };
    Ok(Some(vec![left.clone().cast_to(&l, schema)?, right.clone().cast_to(&r, schema)?]))
}

/// The DECIMAL an operand divides as: its own, or an integer's as `integer_decimal` gives it.
fn operand_type(expr: &Expr, data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::Decimal128(..) => Some(data_type.clone()),
        t if t.is_integer() => integer_decimal(expr, t),
        _ => None,
    }
}

/// The DECIMAL an integer operand meets a DECIMAL as, as Spark's `DecimalPrecision` gives it:
/// an INT, SMALLINT or BIGINT literal the narrowest DECIMAL holding it
/// (`DecimalType.fromLiteral`: 3 is DECIMAL(1, 0)), any other integer its type's
/// (`DecimalType.forType`: an INT is DECIMAL(10, 0)).
pub(super) fn integer_decimal(expr: &Expr, data_type: &DataType) -> Option<DataType> {
    let precision = match integer_literal(expr) {
        Some(value) => value.unsigned_abs().checked_ilog10().map_or(1, |digits| digits as u8 + 1),
        None => integer_type_precision(data_type),
    };
    Some(DataType::Decimal128(precision, 0))
}

/// The digits of an integer type's DECIMAL (`DecimalType.forType`).
pub(super) fn integer_type_precision(data_type: &DataType) -> u8 {
    match data_type {
        DataType::Int8 | DataType::UInt8 => 3,
        DataType::Int16 | DataType::UInt16 => 5,
        DataType::Int32 | DataType::UInt32 => 10,
        _ => 20,
    }
}

/// The value of an INT, SMALLINT or BIGINT literal, perhaps negated; not a TINYINT's, which
/// Spark gives its type's DECIMAL. The SQL rewrite makes a number an INT cast of itself, and
/// the dialect a typed literal (`7S`, `10L`) a TRY_CAST of its number.
pub(super) fn integer_literal(expr: &Expr) -> Option<i64> {
    match expr {
        Expr::Literal(value, _) => match value {
            ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int64(Some(v)) => Some(*v),
            _ => None,
        },
        Expr::Cast(cast) if cast.field.data_type() == &DataType::Int32 => integer_literal(&cast.expr),
        Expr::TryCast(cast) if matches!(cast.field.data_type(), DataType::Int16 | DataType::Int64) => {
            integer_literal(&cast.expr)
        }
        Expr::Negative(inner) => integer_literal(inner).and_then(i64::checked_neg),
        _ => None,
    }
}

/// Spark's `Divide.resultDecimalType`.
fn quotient_type(loss: PrecisionLoss, p1: u8, s1: i8, p2: u8, s2: i8) -> (u8, i8) {
    let (p1, s1, p2, s2) = (i32::from(p1), i32::from(s1), i32::from(p2), i32::from(s2));
    let int_digits = p1 - s1 + s2;
    let scale = i32::from(MINIMUM_ADJUSTED_SCALE).max(s1 + p2 + 1);
    if loss == PrecisionLoss::Allowed {
        return adjust_precision_scale(int_digits + scale, scale);
    }
    let max = i32::from(MAX_PRECISION);
    let (mut int_digits, mut scale) = (int_digits.min(max), scale.min(max));
    let excess = int_digits + scale - max;
    if excess > 0 {
        scale -= excess / 2 + 1;
        int_digits = max - scale;
    }
    bounded(int_digits + scale, scale)
}

/// A DECIMAL result's type as `loss` has it: [`adjust_precision_scale`], or Spark's
/// `DecimalType.bounded`.
pub fn result_decimal(loss: PrecisionLoss, precision: i32, scale: i32) -> (u8, i8) {
    match loss {
        PrecisionLoss::Allowed => adjust_precision_scale(precision, scale),
        PrecisionLoss::Refused => bounded(precision, scale),
    }
}

/// Spark's `DecimalType.bounded`: precision and scale each at most 38.
fn bounded(precision: i32, scale: i32) -> (u8, i8) {
    let max = i32::from(MAX_PRECISION);
    (precision.min(max) as u8, scale.min(max) as i8)
}

/// Spark 4's `widerDecimalType` of DECIMALs (and integers, as their type's DECIMAL) of more
/// than one type: the most integral digits and the largest scale. Past 38 digits it keeps the
/// integral digits and gives up scale (`DecimalType.boundedPreferIntegralDigits`), where
/// DataFusion keeps the scale and fails on the largest values: DECIMAL(38, 11) and
/// DECIMAL(38, 4) meet as DECIMAL(38, 4).
pub fn wider_decimal(types: &[DataType]) -> Option<DataType> {
    let (mut integral, mut scale) = (0i16, 0i16);
    for data_type in types {
        let (p, s) = match data_type {
            DataType::Decimal128(p, s) => (i16::from(*p), i16::from(*s)),
            t if t.is_integer() => (i16::from(integer_type_precision(t)), 0),
            DataType::Null => continue,
            _ => return None,
        };
        integral = integral.max(p - s);
        scale = scale.max(s);
    }
    let mixed = types.iter().filter(|t| !t.is_null()).any(|t| Some(t) != types.iter().find(|t| !t.is_null()));
    let past = (integral + scale - 38).max(0);
    (types.iter().any(DataType::is_decimal) && mixed)
        .then(|| DataType::Decimal128((integral + scale - past) as u8, (scale - past).max(0) as i8))
}

/// Spark's `DecimalType.adjustPrecisionScale`, the type of an arithmetic result with precision
/// loss allowed (the default): past 38 digits, keep the integral digits and give up scale, down
/// to 6 digits of it.
pub fn adjust_precision_scale(precision: i32, scale: i32) -> (u8, i8) {
    if precision <= i32::from(MAX_PRECISION) {
        return (precision as u8, scale as i8);
    }
    let int_digits = precision - scale;
    let min_scale = scale.min(i32::from(MINIMUM_ADJUSTED_SCALE));
    let scale = (i32::from(MAX_PRECISION) - int_digits).max(min_scale);
    (MAX_PRECISION, scale as i8)
}

static DECIMAL_DIVIDE_UDFS: LazyLock<[Arc<ScalarUDF>; 2]> = LazyLock::new(|| {
    [PrecisionLoss::Allowed, PrecisionLoss::Refused].map(|loss| {
        Arc::new(ScalarUDF::new_from_impl(DecimalDivide { loss, signature: Signature::any(2, Volatility::Immutable) }))
    })
});

#[derive(Debug, PartialEq, Eq, Hash)]
struct DecimalDivide {
    loss: PrecisionLoss,
    signature: Signature,
}

impl ScalarUDFImpl for DecimalDivide {
    fn name(&self) -> &str {
        DECIMAL_DIVIDE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)] => {
                let (precision, scale) = quotient_type(self.loss, *p1, *s1, *p2, *s2);
                Ok(DataType::Decimal128(precision, scale))
            }
            other => Err(DataFusionError::Internal(format!("{DECIMAL_DIVIDE} of {other:?}"))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [dividend, divisor]: [ArrayRef; 2] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Internal(format!("{DECIMAL_DIVIDE} takes two arguments")))?;
        let DataType::Decimal128(precision, scale) = *args.return_field.data_type() else {
            return Err(DataFusionError::Internal(format!("{DECIMAL_DIVIDE} returns a DECIMAL")));
        };
        let (dividends, divisors) =
            (dividend.as_primitive::<Decimal128Type>(), divisor.as_primitive::<Decimal128Type>());
        let (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2)) = (dividend.data_type(), divisor.data_type())
        else {
            return Err(DataFusionError::Internal(format!("{DECIMAL_DIVIDE} takes DECIMALs")));
        };
        // a / 10^s1 divided by b / 10^s2, at scale s: a * 10^(s - s1 + s2) / b.
        let shift = i32::from(scale) - i32::from(*s1) + i32::from(*s2);
        let bound = DecimalBound::of(precision, scale);
        let legacy = EvalMode::of(&args.config_options) == EvalMode::Legacy;
        let mut quotients = Vec::with_capacity(dividends.len());
        for (a, b) in dividends.iter().zip(divisors.iter()) {
            let (Some(a), Some(b)) = (a, b) else {
                quotients.push(None);
                continue;
            };
            if b == 0 {
                match legacy {
                    true => quotients.push(None),
                    false => return Err(SqlError::divide_by_zero().into()),
                }
                continue;
            }
            let quotient = divide_half_up(a, b, shift);
            match bound.check(quotient) {
                Ok(()) => quotients.push(Some(quotient.as_i128())),
                Err(_) if legacy => quotients.push(None),
                Err(e) => return Err(DataFusionError::External(Box::new(e))),
            }
        }
        let array = Decimal128Array::from(quotients).with_precision_and_scale(precision, scale)?;
        Ok(ColumnarValue::Array(Arc::new(array)))
    }
}

/// `a * 10^shift / b` rounded half up (away from zero on a half), in 256 bits: a DECIMAL(38)
/// times 10^44 still fits.
pub fn divide_half_up(a: i128, b: i128, shift: i32) -> i256 {
    let (mut numerator, mut denominator) = (i256::from_i128(a), i256::from_i128(b));
    if shift >= 0 {
        numerator = numerator.wrapping_mul(power_of_ten(shift as u32));
    } else {
        denominator = denominator.wrapping_mul(power_of_ten(shift.unsigned_abs()));
    }
    quotient_half_up(numerator, denominator)
}

/// 10^`exponent` in 256 bits (wrapped past 10^76), looked up: `i256::wrapping_pow` multiplies
/// in 256 bits each time, and the callers ask once per value or per group.
pub fn power_of_ten(exponent: u32) -> i256 {
    static POWERS: LazyLock<Vec<i256>> = LazyLock::new(|| {
        std::iter::successors(Some(i256::ONE), |power| power.checked_mul(i256::from_i128(10))).collect()
    });
    match POWERS.get(exponent as usize) {
        Some(power) => *power,
        None => i256::from_i128(10).wrapping_pow(exponent),
    }
}

/// `numerator / denominator` rounded half up (away from zero on a half).
pub fn quotient_half_up(numerator: i256, denominator: i256) -> i256 {
    let quotient = numerator.wrapping_div(denominator);
    let remainder = numerator.wrapping_rem(denominator);
    let twice = remainder.wrapping_abs().wrapping_mul(i256::from_i128(2));
    if twice >= denominator.wrapping_abs() {
        let away = if (numerator < i256::ZERO) != (denominator < i256::ZERO) { i256::MINUS_ONE } else { i256::ONE };
        quotient.wrapping_add(away)
    } else {
        quotient
    }
}

/// What DECIMAL(precision, scale) holds: values of fewer than `precision` digits, as a
/// quotient or a sum's total must be to be returned.
#[derive(Debug, Clone, Copy)]
pub struct DecimalBound {
    /// 10^precision, the least magnitude the type cannot hold.
    limit: i256,
    precision: u8,
    scale: i8,
}

impl DecimalBound {
    pub fn of(precision: u8, scale: i8) -> Self {
        DecimalBound { limit: power_of_ten(u32::from(precision)), precision, scale }
    }

    /// Spark's NUMERIC_VALUE_OUT_OF_RANGE unless the type holds `value`.
    pub fn check(&self, value: i256) -> Result<(), SqlError> {
        if value >= self.limit || value <= -self.limit {
            Err(out_of_range(value, self.precision, self.scale))
        } else {
            Ok(())
        }
    }
}

/// Spark's NUMERIC_VALUE_OUT_OF_RANGE for a value that `precision` digits do not fit.
fn out_of_range(quotient: i256, precision: u8, scale: i8) -> SqlError {
    let digits = quotient.wrapping_abs().to_string();
    let scale = scale.max(0) as usize;
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    let sign = if quotient < i256::ZERO { "-" } else { "" };
    let value = if scale == 0 { format!("{sign}{whole}") } else { format!("{sign}{whole}.{fraction}") };
    SqlError::new(
        "22003",
        format!(
            "[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  {value} cannot be represented as Decimal({precision}, {scale}). If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error, and return NULL instead."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_ten_are_a_one_and_zeros_then_wrap_as_multiplying_does() {
        for exponent in 0..=76 {
            let written = i256::from_string(&format!("1{}", "0".repeat(exponent as usize)));
            assert_eq!(Some(power_of_ten(exponent)), written, "10^{exponent}");
        }
        let wrapped = (0..80).fold(i256::ONE, |power, _| power.wrapping_mul(i256::from_i128(10)));
        assert_eq!(power_of_ten(80), wrapped);
    }

    /// Spark 4.3's result types (`EXPLAIN`ed and run): decimal(12,2) / 3 → (16,6), / an INT
    /// column → (21,13), / a BIGINT → (26,23), (12,2) / (5,1) → (19,8), (38,10) / (38,10) →
    /// (38,6).
    #[test]
    fn quotient_types_are_sparks() {
        let allowed = |p1, s1, p2, s2| quotient_type(PrecisionLoss::Allowed, p1, s1, p2, s2);
        assert_eq!(allowed(12, 2, 1, 0), (16, 6));
        assert_eq!(allowed(10, 2, 10, 0), (21, 13));
        assert_eq!(allowed(5, 2, 20, 0), (26, 23));
        assert_eq!(allowed(12, 2, 5, 1), (19, 8));
        assert_eq!(allowed(38, 10, 38, 10), (38, 6));
        assert_eq!(allowed(2, 0, 3, 1), (9, 6));
    }

    /// Spark 4.3 with `allowPrecisionLoss = false`: (38,4) / (20,6) → (38,12), (30,10) /
    /// (25,5) → (38,24), (10,2) / (38,30) → (38,18), (12,2) / 3 → (16,6).
    #[test]
    fn quotient_types_without_precision_loss_are_sparks() {
        let refused = |p1, s1, p2, s2| quotient_type(PrecisionLoss::Refused, p1, s1, p2, s2);
        assert_eq!(refused(38, 4, 20, 6), (38, 12));
        assert_eq!(refused(30, 10, 25, 5), (38, 24));
        assert_eq!(refused(10, 2, 38, 30), (38, 18));
        assert_eq!(refused(12, 2, 1, 0), (16, 6));
    }

    /// Spark 4.3: -1663.07 / 7 = -237.581429 (half up), 1 / 3 = 0.333333, 2.5 / 2 = 1.250000.
    #[test]
    fn quotients_round_half_up() {
        assert_eq!(divide_half_up(-166307, 7, 6 - 2), i256::from_i128(-237581429));
        assert_eq!(divide_half_up(100, 3, 6 - 2), i256::from_i128(333333));
        assert_eq!(divide_half_up(25, 2, 6 - 1), i256::from_i128(1250000));
        assert_eq!(divide_half_up(1, 2, 0), i256::from_i128(1), "a half goes away from zero");
        assert_eq!(divide_half_up(-1, 2, 0), i256::from_i128(-1));
    }
}
