//! Spark's `sqrt` is Java's `Math.sqrt`: the square root of a negative number is NaN, as
//! `ln(-1)` and `log10(-1)` are. DataFusion's refuses a negative input and fails the whole
//! statement; this one keeps its signature, coercions and ordering and answers as Spark does.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::arity::unary;
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};

/// DataFusion's `sqrt` with Spark's answer below zero.
#[derive(Debug, PartialEq, Eq, Hash)]
struct NegativeIsNaN;

/// The root, and Java's NaN below zero: the processor's own has its sign bit set, and such a NaN
/// would compare below every number.
fn sqrt64(x: f64) -> f64 {
    if x < 0.0 { f64::NAN } else { x.sqrt() }
}

fn sqrt32(x: f32) -> f32 {
    if x < 0.0 { f32::NAN } else { x.sqrt() }
}

/// The session's `sqrt`, or `None` if DataFusion's is not registered.
pub fn spark_sqrt(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("sqrt"), NegativeIsNaN)
}

impl Invoke for NegativeIsNaN {
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Plan("sqrt takes one argument".to_string()))?;
        let root: ArrayRef = match value.data_type() {
            DataType::Float64 => Arc::new(unary::<_, _, Float64Type>(value.as_primitive::<Float64Type>(), sqrt64)),
            DataType::Float32 => Arc::new(unary::<_, _, Float32Type>(value.as_primitive::<Float32Type>(), sqrt32)),
            _ => return inner.invoke_with_args(args),
        };
        Ok(ColumnarValue::Array(root))
    }
}
