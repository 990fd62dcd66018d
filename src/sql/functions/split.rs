//! Spark's `split(str, regex[, limit])` (`StringSplit`, `UTF8String.split`): `str` cut at each
//! match of `regex` into an ARRAY<STRING>. A `limit` above 0 gives at most that many pieces,
//! the last holding the rest; 0 or below (the default, -1) cuts at every match and keeps
//! trailing empty pieces. An empty `regex` cuts between characters, with no trailing empty
//! piece. NULL in any argument gives NULL. DataFusion has no `split`.
//!
//! Where we differ: the regular expression is Rust's `regex` syntax, as for `RLIKE` here, not
//! Java's: look-around and back-references are refused (`2201B`, where Spark's refusals are
//! `22023`). As in Java, a zero-width match at the start gives no leading empty piece.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int32Type};
use datafusion::common::DataFusionError;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use regex::Regex;

use super::scalar_arguments::{answer, two_strings_and_an_int};
use crate::error::SqlError;

#[derive(Debug, PartialEq, Eq, Hash)]
struct Split {
    signature: Signature,
}

pub fn spark_split() -> ScalarUDF {
    ScalarUDF::new_from_impl(Split { signature: Signature::user_defined(Volatility::Immutable) })
}

impl ScalarUDFImpl for Split {
    fn name(&self) -> &str {
        "split"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        two_strings_and_an_int("split", arg_types)
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<ArrayRef>>>()?;
        let (texts, patterns) = (cast(&arrays[0], &DataType::Utf8)?, cast(&arrays[1], &DataType::Utf8)?);
        let (texts, patterns) = (texts.as_string::<i32>(), patterns.as_string::<i32>());
        let limits = arrays.get(2).map(|l| l.as_primitive::<Int32Type>());
        let mut compiled: Option<(String, Regex)> = None;
        let mut out = ListBuilder::new(StringBuilder::new());
        for row in 0..rows {
            if texts.is_null(row) || patterns.is_null(row) || limits.is_some_and(|l| l.is_null(row)) {
                out.append_null();
                continue;
            }
            let (text, pattern) = (texts.value(row), patterns.value(row));
            let limit = limits.map_or(-1, |l| l.value(row));
            let pieces = if pattern.is_empty() && !text.is_empty() {
                characters(text, limit)
            } else {
                if compiled.as_ref().is_none_or(|(source, _)| source != pattern) {
                    match Regex::new(pattern) {
                        Ok(regex) => compiled = Some((pattern.to_string(), regex)),
                        Err(e) => return Err(invalid_pattern(&e)),
                    }
                }
                let (_, regex) = compiled.as_ref().expect("compiled above");
                pieces(text, regex, limit)
            };
            for piece in pieces {
                out.values().append_value(piece);
            }
            out.append(true);
        }
        let array: ArrayRef = Arc::new(out.finish());
        answer(&args.args, array)
    }
}

/// A pattern the regex engine refuses, `2201B` as for `RLIKE` and `regexp_*` here.
fn invalid_pattern(error: &regex::Error) -> DataFusionError {
    DataFusionError::External(Box::new(SqlError::new("2201B", format!("invalid regular expression: {error}"))))
}

/// Java's `String.split(regex, limit)` for a limit that is not 0: trailing empty pieces kept,
/// no leading empty piece for a zero-width match at the start.
fn pieces<'a>(text: &'a str, regex: &Regex, limit: i32) -> Vec<&'a str> {
    let limited = limit > 0;
    let mut pieces = Vec::new();
    let mut index = 0;
    for (start, end) in java_matches(text, regex) {
        if limited && pieces.len() + 1 >= limit as usize {
            break;
        }
        if index == 0 && start == 0 && end == 0 {
            continue;
        }
        pieces.push(&text[index..start]);
        index = end;
    }
    if index == 0 {
        return vec![text];
    }
    pieces.push(&text[index..]);
    pieces
}

/// The matches Java's `Matcher.find` finds one after the other: the next search starts where
/// a match ended, or one character further after an empty match, so that an empty match may
/// follow a non-empty one where it ends (Rust's `find_iter` skips it).
fn java_matches(text: &str, regex: &Regex) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at <= text.len() {
        let Some(m) = regex.find_at(text, at) else { break };
        found.push((m.start(), m.end()));
        at = match (m.start() == m.end(), text[m.end()..].chars().next()) {
            (false, _) => m.end(),
            (true, Some(next)) => m.end() + next.len_utf8(),
            (true, None) => break,
        };
    }
    found
}

/// `UTF8String.split` with an empty pattern: one piece per character, the last holding the
/// rest when `limit` is smaller than the character count.
fn characters(text: &str, limit: i32) -> Vec<&str> {
    let count = text.chars().count();
    let wanted = if limit <= 0 || limit as usize > count { count } else { limit as usize };
    let mut pieces: Vec<&str> = Vec::with_capacity(wanted);
    let mut rest = text;
    while pieces.len() + 1 < wanted {
        let width = rest.chars().next().map_or(0, char::len_utf8);
        pieces.push(&rest[..width]);
        rest = &rest[width..];
    }
    pieces.push(rest);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, pattern: &str, limit: i32) -> Vec<&'static str> {
        let text: &'static str = Box::leak(text.to_string().into_boxed_str());
        if pattern.is_empty() && !text.is_empty() {
            return characters(text, limit);
        }
        pieces(text, &Regex::new(pattern).unwrap(), limit)
    }

    /// Java's and Spark's answers for these, as their documentation gives them.
    #[test]
    fn cuts_as_java_does() {
        assert_eq!(split("oneAtwoBthreeC", "[ABC]", -1), ["one", "two", "three", ""]);
        assert_eq!(split("oneAtwoBthreeC", "[ABC]", 2), ["one", "twoBthreeC"]);
        assert_eq!(split("oneAtwoBthreeC", "[ABC]", 0), ["one", "two", "three", ""]);
        assert_eq!(split("boo:and:foo", "o", -1), ["b", "", ":and:f", "", ""]);
        assert_eq!(split("boo:and:foo", "o", 2), ["b", "o:and:foo"]);
        assert_eq!(split("", ",", -1), [""]);
        assert_eq!(split("a,b", ",", 1), ["a,b"]);
        assert_eq!(split("abc", "", -1), ["a", "b", "c"]);
        assert_eq!(split("abc", "", 2), ["a", "bc"]);
        assert_eq!(split("éa", "", -1), ["é", "a"]);
        assert_eq!(split("", "", -1), [""]);
        assert_eq!(split("abc", "x*", -1), ["a", "b", "c", ""]);
        // An empty match right after a non-empty one, as Java finds it.
        assert_eq!(split("abc", "a*", -1), ["", "", "b", "c", ""]);
        assert_eq!(split("abc", "^", -1), ["abc"]);
        assert_eq!(split("abc", "a", -1), ["", "bc"]);
    }
}
