//! Spark's `TypeCoercion.Division` with ANSI mode's `Divide` and `Remainder` (its `DivModLike`
//! operators): `/` always divides fractionally.
//! Operands that are neither DECIMAL nor both DOUBLE (integers, FLOAT, NULL) are cast to DOUBLE
//! first, so `7 / 2` is 3.5 and `sum(x) / count(*)` an average, where DataFusion divides
//! integers into an integer. And, as Spark 4 runs with `spark.sql.ansi.enabled` by default, a
//! DOUBLE divided by zero (or -0.0) fails with DIVIDE_BY_ZERO (22012) instead of giving an
//! infinity or NaN; a NULL dividend gives NULL, whatever the divisor. DECIMALs divide as
//! Spark's do: [`decimal_division`](super::decimal_division). A FLOAT or DOUBLE `%` by zero
//! fails with REMAINDER_BY_ZERO (22012), as an integer's does, where DataFusion gives NaN.
//! Under legacy mode (`spark.sql.ansi.enabled = false`) a zero divisor gives NULL instead, for
//! every type: the functions read the mode when they run, and an integer or DECIMAL `%`, which
//! stays DataFusion's operator, takes its divisor through `nullif(divisor, 0)`.
//! Runs before DataFusion's type coercion, in the pass of
//! [`DecimalPrecision`](super::decimal_precision) over each expression, bottom up: after it has
//! made a DECIMAL divided by a DOUBLE two DOUBLEs, and before the expression holding the
//! quotient is typed.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::compute::kernels::numeric::{div, rem};
use datafusion::arrow::compute::{cast, nullif};
use datafusion::arrow::datatypes::{DECIMAL128_MAX_PRECISION, DECIMAL256_MAX_PRECISION, DataType, Float64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::functions::expr_fn::nullif as nullif_expr;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility, lit,
};

use super::decimal_division::{decimal_division, decimal_operands};
use crate::config::{EvalMode, PrecisionLoss};
use crate::error::SqlError;

/// The function `/` becomes over DOUBLE operands.
pub const ANSI_DIVIDE: &str = "ansi_divide";

/// The function `%` becomes over FLOAT and DOUBLE operands.
pub const ANSI_REMAINDER: &str = "ansi_remainder";

/// `/` and `%` as Spark's in `mode`, once their operands have Spark's types; a DECIMAL quotient
/// typed as `loss` says.
pub(super) fn fractional_division(
    expr: Expr,
    schema: &DFSchema,
    mode: EvalMode,
    loss: PrecisionLoss,
) -> Result<Transformed<Expr>> {
    let expr = match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Modulo, right }) => {
            return fractional_remainder(left, right, schema, mode);
        }
        expr => expr,
    };
    let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right }) = expr else {
        return Ok(Transformed::no(expr));
    };
    let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema)) else {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right })));
    };
    if let Some(quotient) = decimal_division(&left, &right, schema, loss)? {
        return Ok(Transformed::yes(quotient));
    }
    let numeric = |t: &DataType| t.is_numeric() || t.is_null();
    if !numeric(&left_type) || !numeric(&right_type) || left_type.is_decimal() || right_type.is_decimal() {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right })));
    }
    let args = vec![left.cast_to(&DataType::Float64, schema)?, right.cast_to(&DataType::Float64, schema)?];
    Ok(Transformed::yes(ANSI_DIVIDE_UDF.call(args)))
}

/// `left % right` checked for a zero divisor when either is a FLOAT or DOUBLE (and the other an
/// integer or float): both are taken as the wider of the two float types, as Spark's coercion
/// takes them. Under legacy mode, an integer or DECIMAL divisor is NULL where it is zero.
fn fractional_remainder(
    left: Box<Expr>,
    right: Box<Expr>,
    schema: &DFSchema,
    mode: EvalMode,
) -> Result<Transformed<Expr>> {
    let unchanged =
        |left, right| Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op: Operator::Modulo, right })));
    let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema)) else {
        return unchanged(left, right);
    };
    let float_pair = left_type.is_floating() || right_type.is_floating();
    let numbers = [&left_type, &right_type].iter().all(|t| t.is_integer() || t.is_floating() || t.is_null());
    if !float_pair && mode == EvalMode::Legacy && right_type.is_numeric() {
        let zero = lit(ScalarValue::new_zero(&right_type)?);
        let right = Box::new(nullif_expr(*right, zero));
        return Ok(Transformed::yes(wide_decimal_remainder(left, right, schema)?));
    }
    if !float_pair && (left_type.is_decimal() || right_type.is_decimal()) {
        return Ok(Transformed::yes(wide_decimal_remainder(left, right, schema)?));
    }
    if !float_pair || !numbers {
        return unchanged(left, right);
    }
    let both_float32 = [&left_type, &right_type].iter().all(|t| !t.is_floating() || **t == DataType::Float32);
    let float = if both_float32 { DataType::Float32 } else { DataType::Float64 };
    let args = vec![left.cast_to(&float, schema)?, right.cast_to(&float, schema)?];
    Ok(Transformed::yes(ANSI_REMAINDER_UDF.call(args)))
}

/// `left % right`, computed over 256-bit DECIMALs where its operands, as the DECIMALs Spark
/// computes with (an integer as its DECIMAL), need more than 38 digits at their common scale.
/// Spark takes the remainder of the two exact values (`BigDecimal.remainder`), which is never
/// larger than either; DataFusion first casts both to one 128-bit DECIMAL of the larger scale,
/// which fails for `DECIMAL(38,4) % DECIMAL(20,6)` and `DECIMAL(38,38) % BIGINT`.
fn wide_decimal_remainder(left: Box<Expr>, right: Box<Expr>, schema: &DFSchema) -> Result<Expr> {
    let remainder = |left, right| Expr::BinaryExpr(BinaryExpr { left, op: Operator::Modulo, right });
    let operands = decimal_operands(&left, &right, schema)?.and_then(|operands| <[Expr; 2]>::try_from(operands).ok());
    let Some([l, r]) = operands else { return Ok(remainder(left, right)) };
    let (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) = (l.get_type(schema)?, r.get_type(schema)?)
    else {
        return Ok(remainder(left, right));
    };
    let scale = s1.max(s2);
    let integral = (i16::from(p1) - i16::from(s1)).max(i16::from(p2) - i16::from(s2));
    if integral + i16::from(scale) <= i16::from(DECIMAL128_MAX_PRECISION) {
        return Ok(remainder(left, right));
    }
    let result = remainder(left, right).get_type(schema)?;
    let wide = DataType::Decimal256(DECIMAL256_MAX_PRECISION, scale);
    remainder(Box::new(l.cast_to(&wide, schema)?), Box::new(r.cast_to(&wide, schema)?)).cast_to(&result, schema)
}

static ANSI_REMAINDER_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    let signature = Signature::one_of(
        [DataType::Float32, DataType::Float64].map(|t| TypeSignature::Exact(vec![t.clone(), t])).to_vec(),
        Volatility::Immutable,
    );
    Arc::new(ScalarUDF::new_from_impl(AnsiRemainder { signature }))
});

/// Spark's `Remainder` over FLOATs or DOUBLEs under ANSI mode.
#[derive(Debug, PartialEq, Eq, Hash)]
struct AnsiRemainder {
    signature: Signature,
}

impl ScalarUDFImpl for AnsiRemainder {
    fn name(&self) -> &str {
        ANSI_REMAINDER
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [dividend, divisor]: [ArrayRef; 2] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Internal(format!("{ANSI_REMAINDER} takes two arguments")))?;
        if EvalMode::of(&args.config_options) == EvalMode::Legacy {
            return Ok(ColumnarValue::Array(rem(&dividend, &null_where_zero(&divisor)?)?));
        }
        let divisors = cast(&divisor, &DataType::Float64)?;
        let divisors = divisors.as_primitive::<Float64Type>();
        let zero_divisor =
            (0..dividend.len()).any(|i| dividend.is_valid(i) && divisors.is_valid(i) && divisors.value(i) == 0.0);
        if zero_divisor {
            return Err(SqlError::new(
                "22012",
                "[REMAINDER_BY_ZERO] Remainder by zero. Use `try_mod` to tolerate divisor being 0 and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
            ).into());
        }
        Ok(ColumnarValue::Array(rem(&dividend, &divisor)?))
    }
}

/// `divisors` with NULL where one is zero (or -0.0): what Spark's legacy mode divides by.
pub fn null_where_zero(divisors: &ArrayRef) -> Result<ArrayRef> {
    let doubles = cast(divisors, &DataType::Float64)?;
    let zero: BooleanArray = doubles.as_primitive::<Float64Type>().iter().map(|d| Some(d == Some(0.0))).collect();
    Ok(nullif(divisors, &zero)?)
}

static ANSI_DIVIDE_UDF: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(AnsiDivide { signature: double_pair() })));

fn double_pair() -> Signature {
    Signature::exact(vec![DataType::Float64, DataType::Float64], Volatility::Immutable)
}

/// Spark's `Divide` over DOUBLEs under ANSI mode.
#[derive(Debug, PartialEq, Eq, Hash)]
struct AnsiDivide {
    signature: Signature,
}

impl ScalarUDFImpl for AnsiDivide {
    fn name(&self) -> &str {
        ANSI_DIVIDE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [dividend, divisor]: [ArrayRef; 2] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Internal(format!("{ANSI_DIVIDE} takes two arguments")))?;
        if EvalMode::of(&args.config_options) == EvalMode::Legacy {
            return Ok(ColumnarValue::Array(div(&dividend, &null_where_zero(&divisor)?)?));
        }
        let (dividends, divisors) = (dividend.as_primitive::<Float64Type>(), divisor.as_primitive::<Float64Type>());
        let zero_divisor =
            (0..dividends.len()).any(|i| dividends.is_valid(i) && divisors.is_valid(i) && divisors.value(i) == 0.0);
        if zero_divisor {
            return Err(DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None));
        }
        Ok(ColumnarValue::Array(div(&dividend, &divisor)?))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Float64Array;
    use datafusion::arrow::datatypes::Field;
    use datafusion::common::config::ConfigOptions;

    use super::*;

    fn divide(dividends: Vec<Option<f64>>, divisors: Vec<Option<f64>>) -> Result<Vec<Option<f64>>> {
        let rows = dividends.len();
        let args = ScalarFunctionArgs {
            args: vec![
                ColumnarValue::Array(Arc::new(Float64Array::from(dividends))),
                ColumnarValue::Array(Arc::new(Float64Array::from(divisors))),
            ],
            arg_fields: ["a", "b"].map(|name| Arc::new(Field::new(name, DataType::Float64, true))).to_vec(),
            number_rows: rows,
            return_field: Arc::new(Field::new("q", DataType::Float64, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let ColumnarValue::Array(result) = ANSI_DIVIDE_UDF.invoke_with_args(args)? else { panic!("an array") };
        Ok(result.as_primitive::<Float64Type>().iter().collect())
    }

    /// Spark 4.3 (ANSI on): `7D / 2D` = 3.5, `-1D / 4D` = -0.25; `NULL / 0D` is NULL and
    /// `1D / NULL` is NULL; `1D / 0D` and `1D / -0D` raise DIVIDE_BY_ZERO.
    #[test]
    fn doubles_divide_and_a_zero_divisor_fails() {
        let quotients =
            divide(vec![Some(7.0), Some(-1.0), None, Some(1.0)], vec![Some(2.0), Some(4.0), Some(0.0), None]);
        assert_eq!(quotients.unwrap(), [Some(3.5), Some(-0.25), None, None]);
        for zero in [0.0, -0.0] {
            let error = divide(vec![Some(1.0)], vec![Some(zero)]).unwrap_err();
            assert!(matches!(error, DataFusionError::ArrowError(ref e, _) if matches!(**e, ArrowError::DivideByZero)));
        }
    }
}
