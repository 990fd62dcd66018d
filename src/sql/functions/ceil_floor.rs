//! Spark's `ceil` and `floor` of a FLOAT or DOUBLE under ANSI mode: a BIGINT, NaN giving 0 (as
//! Java's conversion gives), and ARITHMETIC_OVERFLOW (22003) for an infinity or a value past
//! BIGINT's range, where `datafusion-spark`'s saturates. Other inputs are that function's
//! (integers as BIGINT, DECIMALs to scale 0), and so is everything under legacy mode
//! (`spark.sql.ansi.enabled = false`), where Spark saturates too.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};
use crate::config::EvalMode;
use crate::error::SqlError;
use crate::exec::columnar::shaped_like;

/// Which way a float is rounded to a whole number.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Rounding {
    Ceil,
    Floor,
}

/// The session's `ceil` and `floor`, checked; `None` for one the session lacks.
pub fn spark_ceil_and_floor(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> [Option<ScalarUDF>; 2] {
    [overridden(lookup("ceil"), Rounding::Ceil), overridden(lookup("floor"), Rounding::Floor)]
}

/// 2^63: the least float past BIGINT's range.
const PAST_BIGINT: f64 = 9_223_372_036_854_775_808.0;

impl Rounding {
    fn whole(&self, x: f64) -> Result<i64> {
        let whole = match self {
            Rounding::Ceil => x.ceil(),
            Rounding::Floor => x.floor(),
        };
        if whole.is_nan() {
            return Ok(0);
        }
        if !(-PAST_BIGINT..PAST_BIGINT).contains(&whole) {
            return Err(SqlError::new(
                "22003",
                "[ARITHMETIC_OVERFLOW] overflow. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
            ).into());
        }
        Ok(whole as i64)
    }
}

impl Invoke for Rounding {
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Plan("ceil and floor take one argument".to_string()))?;
        if !value.data_type().is_floating() || EvalMode::of(&args.config_options) == EvalMode::Legacy {
            return inner.invoke_with_args(args);
        }
        let doubles = cast(&value, &DataType::Float64)?;
        let doubles = doubles.as_primitive::<Float64Type>();
        let wholes = (0..doubles.len())
            .map(|row| doubles.is_valid(row).then(|| self.whole(doubles.value(row))).transpose())
            .collect::<Result<Int64Array>>()?;
        shaped_like(&args.args[0], Arc::new(wholes) as ArrayRef)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3: `ceil(2.5D)` = 3, `floor(-2.5D)` = -3, `ceil(NaN)` = 0; `ceil(1e20)`,
    /// `ceil(Infinity)` and `floor(9.2233720368547758E18D)` fail with ARITHMETIC_OVERFLOW.
    #[test]
    fn floats_round_to_bigints_within_range() {
        assert_eq!(Rounding::Ceil.whole(2.5).unwrap(), 3);
        assert_eq!(Rounding::Floor.whole(-2.5).unwrap(), -3);
        assert_eq!(Rounding::Ceil.whole(f64::NAN).unwrap(), 0);
        assert_eq!(Rounding::Floor.whole(-PAST_BIGINT).unwrap(), i64::MIN);
        for x in [1e20, f64::INFINITY, f64::NEG_INFINITY, 9.223_372_036_854_776e18] {
            assert!(Rounding::Floor.whole(x).is_err(), "{x}");
        }
    }
}
