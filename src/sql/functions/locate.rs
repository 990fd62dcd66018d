//! Spark's `locate(substr, str[, pos])` (`StringLocate` in `stringExpressions.scala`): the
//! 1-based character position of the first `substr` in `str` at or after position `pos`
//! (default 1), 0 when there is none or `pos` is below 1 or NULL, NULL when `substr` or `str`
//! is NULL. DataFusion has no `locate`; its `strpos` and `instr` take no start position.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use super::scalar_arguments::{answer, two_strings_and_an_int};

#[derive(Debug, PartialEq, Eq, Hash)]
struct Locate {
    signature: Signature,
}

pub fn spark_locate() -> ScalarUDF {
    ScalarUDF::new_from_impl(Locate { signature: Signature::user_defined(Volatility::Immutable) })
}

impl ScalarUDFImpl for Locate {
    fn name(&self) -> &str {
        "locate"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        two_strings_and_an_int("locate", arg_types)
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<ArrayRef>>>()?;
        let (needles, haystacks) = (cast(&arrays[0], &DataType::Utf8)?, cast(&arrays[1], &DataType::Utf8)?);
        let (needles, haystacks) = (needles.as_string::<i32>(), haystacks.as_string::<i32>());
        let starts = arrays.get(2).map(|s| s.as_primitive::<Int32Type>());
        let positions: Int32Array = (0..rows)
            .map(|row| {
                let start = match starts {
                    Some(starts) if starts.is_null(row) => return Some(0),
                    Some(starts) => starts.value(row),
                    None => 1,
                };
                if needles.is_null(row) || haystacks.is_null(row) {
                    return None;
                }
                Some(position(needles.value(row), haystacks.value(row), start))
            })
            .collect();
        let positions: ArrayRef = Arc::new(positions);
        answer(&args.args, positions)
    }
}

/// The 1-based character position of `needle` in `haystack` from character `start` on. As
/// `UTF8String.indexOf`, an empty `needle` is found at position 1 whatever `start` is.
fn position(needle: &str, haystack: &str, start: i32) -> i32 {
    if start < 1 {
        return 0;
    }
    if needle.is_empty() {
        return 1;
    }
    let skipped = (start - 1) as usize;
    let Some((offset, _)) = haystack.char_indices().nth(skipped) else { return 0 };
    match haystack[offset..].find(needle) {
        Some(found) => (skipped + haystack[offset..offset + found].chars().count() + 1) as i32,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::position;

    /// Spark 4.3's answers.
    #[test]
    fn positions_count_characters_from_one() {
        assert_eq!(position("a", "banana", 1), 2);
        assert_eq!(position("a", "banana", 3), 4);
        assert_eq!(position("a", "banana", 0), 0);
        assert_eq!(position("a", "banana", -1), 0);
        assert_eq!(position("x", "banana", 1), 0);
        assert_eq!(position("b", "éb", 1), 2);
        assert_eq!(position("", "abc", 2), 1);
        assert_eq!(position("a", "abc", 4), 0);
    }
}
