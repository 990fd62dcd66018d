//! Hive-style partition directories (`event_date=2026-01-01/country=US`) as Spark names
//! them: values rendered as Spark casts them to strings, special characters escaped as
//! `%XX`, NULL as `__HIVE_DEFAULT_PARTITION__`.

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;

use crate::error::SqlError;

pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Characters Spark's `ExternalCatalogUtils.escapePathName` escapes.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '\u{7f}' | '{' | '[' | ']' | '^')
}

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) {
            let mut buf = [0u8; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // Bytes, not `str` slices: what follows a `%` may be any UTF-8 character.
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) =
                (bytes.get(i + 1).and_then(hex_digit), bytes.get(i + 2).and_then(hex_digit))
        {
            out.push(high << 4 | low);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(byte: &u8) -> Option<u8> {
    char::from(*byte).to_digit(16).map(|d| d as u8)
}

/// The directory of one row, from single-row arrays of its partition values.
pub fn partition_path(values: &[(&str, ArrayRef)]) -> Result<String, SqlError> {
    let options = FormatOptions::default()
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
        .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f"));
    let mut parts = Vec::with_capacity(values.len());
    for (name, array) in values {
        let value = if array.is_null(0) {
            NULL_PARTITION.to_string()
        } else {
            escape(&ArrayFormatter::try_new(array.as_ref(), &options)?.value(0).to_string())
        };
        parts.push(format!("{}={value}", escape(name)));
    }
    Ok(parts.join("/"))
}

/// The value of each partition column named in a directory, typed as the column.
pub fn partition_values(path: &str, columns: &[(String, DataType)]) -> Result<Vec<ScalarValue>, SqlError> {
    let mut found = std::collections::HashMap::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| SqlError::internal(format!("partition directory {part} is not of the form col=value")))?;
        found.insert(unescape(name), unescape(value));
    }
    columns
        .iter()
        .map(|(name, ty)| match found.get(name).map(String::as_str) {
            None => Err(SqlError::internal(format!("partition directory {path} lacks column {name}"))),
            Some(NULL_PARTITION) => Ok(ScalarValue::try_from(ty)?),
            Some(text) => Ok(ScalarValue::Utf8(Some(text.to_string())).cast_to(ty)?),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Date32Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn paths_escape_like_spark_and_parse_back() {
        let values: Vec<(&str, ArrayRef)> = vec![
            ("d", Arc::new(Date32Array::from(vec![20454]))),
            ("c", Arc::new(StringArray::from(vec!["a/b=c d"]))),
            ("n", Arc::new(Int64Array::from(vec![None::<i64>]))),
        ];
        let path = partition_path(&values).unwrap();
        assert_eq!(path, "d=2026-01-01/c=a%2Fb%3Dc d/n=__HIVE_DEFAULT_PARTITION__");
        let parsed = partition_values(
            &path,
            &[("d".into(), DataType::Date32), ("c".into(), DataType::Utf8), ("n".into(), DataType::Int64)],
        )
        .unwrap();
        assert_eq!(
            parsed,
            vec![ScalarValue::Date32(Some(20454)), ScalarValue::from("a/b=c d"), ScalarValue::Int64(None)]
        );
    }

    #[test]
    fn stray_percent_signs_before_multibyte_characters_stay_text() {
        assert_eq!(unescape("%aé"), "%aé");
        assert_eq!(unescape("%é%2F%"), "%é/%");
        assert_eq!(unescape("a%2"), "a%2");
    }
}
