//! A function's computed column given back in its input's shape: a scalar for a scalar
//! argument (so that constant folding and a scalar's broadcast keep working), else the column.

use datafusion::arrow::array::ArrayRef;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;

/// The values of a function's argument: a scalar as one value (even over no rows), which
/// [`shaped_like`] makes a scalar again; else the column.
pub fn input_column(input: &ColumnarValue) -> Result<ArrayRef> {
    input.to_array(1)
}

/// `output` as `input` was: its first value where `input` is a scalar.
pub fn shaped_like(input: &ColumnarValue, output: ArrayRef) -> Result<ColumnarValue> {
    Ok(match input {
        ColumnarValue::Scalar(_) => ColumnarValue::Scalar(ScalarValue::try_from_array(&output, 0)?),
        ColumnarValue::Array(_) => ColumnarValue::Array(output),
    })
}
