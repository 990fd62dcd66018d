//! Spark's `pmod(a, b)` under ANSI mode (`Pmod` in `arithmetic.scala`): a zero `b` fails with
//! REMAINDER_BY_ZERO (`22012`), for DOUBLEs too, unless `a` is NULL, where the `pmod` of `datafusion-spark` gives
//! NULL. Otherwise that `pmod` answers; under legacy mode (`spark.sql.ansi.enabled = false`) a
//! zero `b` gives NULL, where that `pmod` gives NaN for DOUBLEs.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};
use crate::config::EvalMode;
use crate::error::SqlError;
use crate::planner::division::null_where_zero;

#[derive(Debug, PartialEq, Eq, Hash)]
struct ZeroDivisorFails;

/// The session's `pmod`, or `None` if there is none.
pub fn spark_pmod(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("pmod"), ZeroDivisorFails)
}

impl Invoke for ZeroDivisorFails {
    fn invoke(&self, inner: &ScalarUDF, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if EvalMode::of(&args.config_options) == EvalMode::Legacy {
            let divisors = args.args[1].to_array(args.number_rows)?;
            args.args[1] = ColumnarValue::Array(null_where_zero(&divisors)?);
            return inner.invoke_with_args(args);
        }
        // Columns of one length: a scalar beside a column is repeated, two scalars are one row.
        if let Ok([dividends, divisors]) = <[_; 2]>::try_from(ColumnarValue::values_to_arrays(&args.args)?) {
            let divisors = cast(&divisors, &DataType::Float64)?;
            let divisors = divisors.as_primitive::<Float64Type>();
            // A NULL dividend gives NULL before the divisor is looked at.
            let zero_divisor =
                |row: usize| dividends.is_valid(row) && divisors.is_valid(row) && divisors.value(row) == 0.0;
            if (0..divisors.len()).any(zero_divisor) {
                return Err(SqlError::new(
                    "22012",
                    "[REMAINDER_BY_ZERO] Remainder by zero. Use `try_mod` to tolerate divisor being 0 and return NULL instead.",
                ).into());
            }
        }
        inner.invoke_with_args(args)
    }
}
