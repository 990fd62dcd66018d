//! Spark's `abs` under ANSI mode: the absolute value of an integer type's least value does not
//! fit the type and fails with ARITHMETIC_OVERFLOW (22003), as `-x` does; DataFusion's `abs`
//! returns the value itself. A negative DECIMAL is negated as `-x` negates it, in 34
//! significant digits. Everything else is DataFusion's `abs`, as are integers under legacy mode
//! (`spark.sql.ansi.enabled = false`), where Spark's `abs` of the least value is the value.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};
use crate::config::EvalMode;
use crate::planner::ansi_arithmetic::{fail_on_least_integer, negate_decimals};

/// DataFusion's `abs`, checked.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedAbs;

/// The session's `abs`, or `None` if DataFusion's is not registered.
pub fn spark_abs(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("abs"), CheckedAbs)
}

impl Invoke for CheckedAbs {
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Plan("abs takes one argument".to_string()))?;
        let mode = EvalMode::of(&args.config_options);
        if mode == EvalMode::Ansi {
            fail_on_least_integer(&value)?;
        }
        if value.data_type().is_decimal() {
            let absolute = negate_decimals(&value, |v| v < 0)?;
            return match &args.args[0] {
                ColumnarValue::Scalar(_) => Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&absolute, 0)?)),
                ColumnarValue::Array(_) => Ok(ColumnarValue::Array(absolute)),
            };
        }
        inner.invoke_with_args(args)
    }
}
