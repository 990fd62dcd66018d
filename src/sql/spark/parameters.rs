//! Binding `$n` before a statement goes to Spark: each parameter becomes a Spark SQL literal
//! of its bound type, written into the text where the marker stood. Strings are escaped as
//! Spark's parser reads them (backslash escapes), so a value can never end its literal.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

use crate::error::SqlError;

/// `sql` with each `$n` outside quotes and comments replaced by parameter n's literal.
pub(crate) fn bind(sql: &str, params: &[ScalarValue]) -> Result<String, SqlError> {
    if params.is_empty() {
        return Ok(sql.to_string());
    }
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'\'' | b'"' | b'`') => i = end_of_quoted(bytes, i, quote),
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = sql[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = sql[i + 2..].find("*/").map_or(bytes.len(), |n| i + n + 4),
            b'$' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
                let number: usize = sql[i + 1..i + 1 + digits].parse().unwrap_or(0);
                let value = number
                    .checked_sub(1)
                    .and_then(|index| params.get(index))
                    .ok_or_else(|| SqlError::new("42P02", format!("there is no parameter ${number}")))?;
                out.push_str(&sql[copied..i]);
                out.push_str(&literal(value)?);
                i += 1 + digits;
                copied = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// Past the quoted text starting at `start`; a backslash escapes the next character in
/// strings, a doubled backtick ends nothing in identifiers.
fn end_of_quoted(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote != b'`' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// A Spark SQL literal of `value`'s type.
fn literal(value: &ScalarValue) -> Result<String, SqlError> {
    let data_type = value.data_type();
    if value.is_null() {
        return Ok(format!("CAST(NULL AS {})", spark_type(&data_type)?));
    }
    Ok(match value {
        ScalarValue::Boolean(Some(b)) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        ScalarValue::Int8(Some(n)) => format!("{n}Y"),
        ScalarValue::Int16(Some(n)) => format!("{n}S"),
        ScalarValue::Int32(Some(n)) => n.to_string(),
        ScalarValue::Int64(Some(n)) => format!("{n}L"),
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => string(s),
        ScalarValue::Binary(Some(b)) | ScalarValue::LargeBinary(Some(b)) | ScalarValue::BinaryView(Some(b)) => {
            format!("X'{}'", b.iter().map(|byte| format!("{byte:02X}")).collect::<String>())
        }
        // Through text, so NaN, infinities and every digit survive.
        _ => format!("CAST({} AS {})", string(&value.to_string()), spark_type(&data_type)?),
    })
}

fn string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Spark's name of a parameter's type.
fn spark_type(data_type: &DataType) -> Result<String, SqlError> {
    Ok(match data_type {
        DataType::Null | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".to_string(),
        DataType::Boolean => "BOOLEAN".to_string(),
        DataType::Int8 => "TINYINT".to_string(),
        DataType::Int16 => "SMALLINT".to_string(),
        DataType::Int32 => "INT".to_string(),
        DataType::Int64 => "BIGINT".to_string(),
        DataType::Float32 => "FLOAT".to_string(),
        DataType::Float64 => "DOUBLE".to_string(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Date32 => "DATE".to_string(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".to_string(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".to_string(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BINARY".to_string(),
        other => {
            return Err(SqlError::feature_not_supported(format!("a parameter of type {other} on Spark")));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_each_parameter_as_a_literal_of_its_type() {
        let params = [
            ScalarValue::Int32(Some(7)),
            ScalarValue::Utf8(Some("it's a \\ test".into())),
            ScalarValue::Int64(None),
            ScalarValue::Float64(Some(f64::NAN)),
        ];
        let sql = "SELECT $1, $2, $3, $4, $1 + $10x";
        let error = bind(sql, &params).unwrap_err();
        assert_eq!(error.code, "42P02", "$10 has no value");
        let bound = bind("SELECT $1, $2, $3, $4, $1", &params).unwrap();
        assert_eq!(bound, r"SELECT 7, 'it\'s a \\ test', CAST(NULL AS BIGINT), CAST('NaN' AS DOUBLE), 7");
    }

    #[test]
    fn leaves_markers_in_strings_identifiers_and_comments() {
        let params = [ScalarValue::Int16(Some(3))];
        let sql = "SELECT '$1', `$1`, \"a\\\"$1\" -- $1\n, $1 /* $1 */";
        assert_eq!(bind(sql, &params).unwrap(), "SELECT '$1', `$1`, \"a\\\"$1\" -- $1\n, 3S /* $1 */");
    }
}
