//! What the scalar functions written here share: their argument types and how they answer.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;

/// The argument types of `name(string, string[, int])` (`locate`, `split`).
pub(super) fn two_strings_and_an_int(name: &str, arg_types: &[DataType]) -> Result<Vec<DataType>> {
    match arg_types.len() {
        2 => Ok(vec![DataType::Utf8, DataType::Utf8]),
        3 => Ok(vec![DataType::Utf8, DataType::Utf8, DataType::Int32]),
        n => plan_err!("{name} takes two or three arguments, not {n}"),
    }
}

/// A function's answer for `args`: one value where every argument was one, else the array.
pub(super) fn answer(args: &[ColumnarValue], array: ArrayRef) -> Result<ColumnarValue> {
    Ok(if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
    } else {
        ColumnarValue::Array(array)
    })
}
