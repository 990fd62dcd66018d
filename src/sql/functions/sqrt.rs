//! Spark's `sqrt` is Java's `Math.sqrt`: the square root of a negative number is NaN, as
//! `ln(-1)` and `log10(-1)` are. DataFusion's refuses a negative input and fails the whole
//! statement; this one keeps its signature, coercions and ordering and answers as Spark does.

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::arity::unary;
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::error::Result;
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};
use std::sync::Arc;

/// DataFusion's `sqrt` with Spark's answer below zero.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkSqrt {
    inner: ScalarUDF,
}

/// The session's `sqrt`, or `None` if DataFusion's is not registered.
pub fn spark_sqrt(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    let inner = lookup("sqrt")?.as_ref().clone();
    Some(ScalarUDF::new_from_impl(SparkSqrt { inner }))
}

impl ScalarUDFImpl for SparkSqrt {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| datafusion::error::DataFusionError::Plan("sqrt takes one argument".to_string()))?;
        let root: ArrayRef = match value.data_type() {
            DataType::Float64 => Arc::new(unary::<_, _, Float64Type>(value.as_primitive::<Float64Type>(), f64::sqrt)),
            DataType::Float32 => Arc::new(unary::<_, _, Float32Type>(value.as_primitive::<Float32Type>(), f32::sqrt)),
            _ => return self.inner.invoke_with_args(args),
        };
        Ok(ColumnarValue::Array(root))
    }
}
