//! PostgreSQL's binary COPY format: the signature and header, big-endian lengths and counts
//! read off the data, and a field's value in its type's binary send format.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;

use crate::server::encoding::{BinaryError, decode_binary, numeric_binary_text, pg_type};

pub(super) const BINARY_SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
pub(super) const BINARY_EOF: &str = "unexpected EOF in COPY data";

/// Reads big-endian integers and byte runs off the front of a slice.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }
    pub(super) fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    pub(super) fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
}

/// A value in the binary format of the type the column is described as (see
/// `encoding::pg_type`), as the column's Arrow value.
pub(super) fn binary_value(dt: &DataType, raw: &[u8]) -> Result<ScalarValue, String> {
    let unsupported = || format!("binary COPY into a column of type {dt} is not supported");
    // Decimals are cast from their text, as in the text format, so the column's scale rounds the exact value.
    if let DataType::Decimal128(..) = dt {
        return match numeric_binary_text(raw)?.as_str() {
            "NaN" | "Infinity" | "-Infinity" => Err("NaN and infinite numerics cannot be stored".to_string()),
            text => {
                ScalarValue::try_from_string(text.to_string(), dt).map_err(|_| "numeric field overflow".to_string())
            }
        };
    }
    let ty = pg_type(dt).map_err(|_| unsupported())?;
    let value = decode_binary(&ty, raw).map_err(|e| match e {
        BinaryError::Invalid(message) => message,
        BinaryError::Encoding => "invalid byte sequence for encoding \"UTF8\"".to_string(),
        BinaryError::Unsupported => unsupported(),
    })?;
    match (dt, value) {
        (_, value) if value.data_type() == *dt => Ok(value),
        (DataType::Int8, value) => value.cast_to(dt).map_err(|_| "tinyint out of range".to_string()),
        (DataType::Timestamp(TimeUnit::Microsecond, tz), ScalarValue::TimestampMicrosecond(micros, _)) => {
            Ok(ScalarValue::TimestampMicrosecond(micros, tz.clone()))
        }
        _ => Err(unsupported()),
    }
}
