//! Spark's `IntegralDivide`, `a div b` (also called as `div(a, b)`): the quotient truncated
//! toward zero, a BIGINT. Integral operands are read as BIGINT, so `-2147483648 div -1` is
//! 2147483648; a DECIMAL operand makes it a decimal division whose quotient is truncated
//! (`7.5 div 2` is 3); other types are refused, as Spark refuses `2.5D div 2`. Division by zero
//! fails with 22012 and `-9223372036854775808L div -1` with 22003, as under Spark's ANSI mode;
//! under legacy mode (`spark.sql.ansi.enabled = false`) they are NULL and a wrapped quotient.
//! A decimal quotient past BIGINT's range wraps around, as Spark's does.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::kernels::arity::try_binary;
use datafusion::arrow::compute::kernels::numeric::div;
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Int64Type, i256};
use datafusion::arrow::error::ArrowError;
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::config::EvalMode;
use crate::planner::decimal_division::power_of_ten;
use crate::planner::division::null_where_zero;

/// Integers meet a decimal as DECIMAL(20,0), which holds any BIGINT.
const INTEGER_AS_DECIMAL: DataType = DataType::Decimal128(20, 0);

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegralDivide {
    signature: Signature,
}

pub fn integral_divide_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(IntegralDivide { signature: Signature::user_defined(Volatility::Immutable) })
}

impl ScalarUDFImpl for IntegralDivide {
    fn name(&self) -> &str {
        "div"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let integral = |t: &DataType| t.is_integer() || *t == DataType::Null;
        let [left, right] = arg_types else {
            return plan_err!("div takes two arguments, got {}", arg_types.len());
        };
        if !arg_types.iter().all(|t| integral(t) || matches!(t, DataType::Decimal128(..))) {
            return plan_err!("Cannot coerce div operands {left} and {right}: div takes integral and decimal numbers");
        }
        let decimal = arg_types.iter().any(|t| matches!(t, DataType::Decimal128(..)));
        Ok(arg_types
            .iter()
            .map(|t| match t {
                DataType::Decimal128(..) => t.clone(),
                _ if decimal => INTEGER_AS_DECIMAL,
                _ => DataType::Int64,
            })
            .collect())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalars = args.args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_)));
        let [left, right] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| datafusion::error::DataFusionError::Plan("div takes two arguments".to_string()))?;
        let legacy = EvalMode::of(&args.config_options) == EvalMode::Legacy;
        let right = if legacy { null_where_zero(&right)? } else { right };
        let truncated = match (left.data_type(), right.data_type()) {
            (DataType::Decimal128(_, left_scale), DataType::Decimal128(_, right_scale)) => {
                decimal_quotients(&left, *left_scale, &right, *right_scale)?
            }
            _ if legacy => {
                let (dividends, divisors) = (left.as_primitive::<Int64Type>(), right.as_primitive::<Int64Type>());
                let quotients = dividends.iter().zip(divisors.iter()).map(|(a, b)| Some(a?.wrapping_div(b?)));
                Arc::new(quotients.collect::<Int64Array>())
            }
            // Checked: a zero divisor and `i64::MIN div -1` are errors, not wrapped or NULL.
            _ => {
                let quotient = div(&left, &right)?;
                cast_with_options(&quotient, &DataType::Int64, &CastOptions { safe: false, ..Default::default() })?
            }
        };
        Ok(if scalars {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&truncated, 0)?)
        } else {
            ColumnarValue::Array(truncated)
        })
    }
}

/// DECIMAL quotients truncated toward zero, exactly, then taken to 64 bits as Spark's
/// `Decimal.toLong` takes them: a quotient past BIGINT's range wraps around.
fn decimal_quotients(left: &ArrayRef, left_scale: i8, right: &ArrayRef, right_scale: i8) -> Result<ArrayRef> {
    // a / 10^sa ÷ b / 10^sb is (a · 10^sb) ÷ (b · 10^sa), which 256 bits hold for 38 digits.
    let (left_up, right_up) = (power_of_ten(right_scale as u32), power_of_ten(left_scale as u32));
    let quotients: Int64Array = try_binary(
        left.as_primitive::<Decimal128Type>(),
        right.as_primitive::<Decimal128Type>(),
        |a: i128, b: i128| {
            if b == 0 {
                return Err(ArrowError::DivideByZero);
            }
            let quotient = i256::from_i128(a).wrapping_mul(left_up) / i256::from_i128(b).wrapping_mul(right_up);
            Ok(quotient.as_i128() as i64)
        },
    )?;
    Ok(Arc::new(quotients))
}
