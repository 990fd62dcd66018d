//! Spark's `initcap` (`UTF8String.toLowerCase().toTitleCase()`): the string lower-cased, then
//! each letter at the start or after a space in title case. Only a space starts a word:
//! `initcap('ab-cd')` is `Ab-cd` and `initcap('a\tb')` is `A\tb`, where DataFusion's starts one
//! after any character that is not a letter or digit and keeps the other letters' case.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};

/// DataFusion's `initcap` with Spark's words and case.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SpaceSeparatedTitleCase;

/// The session's `initcap`, or `None` if DataFusion's is not registered.
pub fn spark_initcap(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("initcap"), SpaceSeparatedTitleCase)
}

impl Invoke for SpaceSeparatedTitleCase {
    fn invoke(&self, _: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [text] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Plan("initcap takes one argument".to_string()))?;
        let titled: StringArray = match text.data_type() {
            DataType::Utf8 => text.as_string::<i32>().iter().map(|s| s.map(title_case)).collect(),
            DataType::LargeUtf8 => text.as_string::<i64>().iter().map(|s| s.map(title_case)).collect(),
            DataType::Utf8View => text.as_string_view().iter().map(|s| s.map(title_case)).collect(),
            other => return Err(DataFusionError::Plan(format!("initcap of {other} is not supported"))),
        };
        let titled: ArrayRef = Arc::new(titled);
        Ok(ColumnarValue::Array(datafusion::arrow::compute::cast(&titled, text.data_type())?))
    }
}

fn title_case(text: &str) -> String {
    let mut titled = String::with_capacity(text.len());
    let mut word_start = true;
    for c in text.to_lowercase().chars() {
        if word_start {
            titled.extend(title_case_char(c));
        } else {
            titled.push(c);
        }
        word_start = c == ' ';
    }
    titled
}

/// Java's `Character.toTitleCase`: the upper case, but for the four digraphs Unicode gives a
/// title case of their own (`ǆ` → `ǅ`, not `Ǆ`).
fn title_case_char(c: char) -> impl Iterator<Item = char> {
    let digraph = match c {
        'ǆ' => Some('ǅ'),
        'ǉ' => Some('ǈ'),
        'ǌ' => Some('ǋ'),
        'ǳ' => Some('ǲ'),
        _ => None,
    };
    let upper = digraph.is_none().then(|| c.to_uppercase()).into_iter().flatten();
    digraph.into_iter().chain(upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3's answers.
    #[test]
    fn words_start_after_spaces_only() {
        let cases = [
            ("x-y_z", "X-y_z"),
            ("ab-cd", "Ab-cd"),
            ("hELLO wORLD", "Hello World"),
            ("  two  spaces", "  Two  Spaces"),
            ("élan vital", "Élan Vital"),
            ("a\tb", "A\tb"),
            ("ǆemal", "ǅemal"),
        ];
        for (text, spark) in cases {
            assert_eq!(title_case(text), spark, "{text}");
        }
    }
}
