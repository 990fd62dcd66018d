//! PostgreSQL's binary send formats read back into `ScalarValue`s, for Bind
//! parameters and binary COPY rows alike: each value becomes the Arrow type
//! its PostgreSQL type is planned as (see `types::arrow_type`), numerics with
//! their own precision and scale.

use datafusion::common::ScalarValue;
use pgwire::api::Type;

use super::datetime::{PG_EPOCH_DAYS, PG_EPOCH_USECS, USECS_PER_DAY};
use super::numeric::{numeric_binary_text, parse_numeric};

/// Why a binary value was rejected.
pub(crate) enum BinaryError {
    /// Not a valid value of its type; the message says why.
    Invalid(String),
    /// The type has no binary decoder here.
    Unsupported,
    /// Text that is not UTF-8.
    Encoding,
}

/// Decodes `raw`, a value in the binary format of `ty`: integers and floats
/// big-endian (OID unsigned, as Int64), text as UTF-8, dates as days and
/// times and timestamps as microseconds (since 2000-01-01 and midnight;
/// timestamptz in UTC), numerics by way of their text (see [`numeric_binary_text`]).
pub(crate) fn decode_binary(ty: &Type, raw: &[u8]) -> Result<ScalarValue, BinaryError> {
    let invalid = |message: &str| BinaryError::Invalid(message.to_owned());
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(Some(exact::<1>(raw)?[0] != 0)),
        Type::INT2 => ScalarValue::Int16(Some(i16::from_be_bytes(exact(raw)?))),
        Type::INT4 => ScalarValue::Int32(Some(i32::from_be_bytes(exact(raw)?))),
        Type::INT8 => ScalarValue::Int64(Some(i64::from_be_bytes(exact(raw)?))),
        Type::OID => ScalarValue::Int64(Some(i64::from(u32::from_be_bytes(exact(raw)?)))),
        Type::FLOAT4 => ScalarValue::Float32(Some(f32::from_be_bytes(exact(raw)?))),
        Type::FLOAT8 => ScalarValue::Float64(Some(f64::from_be_bytes(exact(raw)?))),
        Type::NUMERIC => {
            let text = numeric_binary_text(raw).map_err(BinaryError::Invalid)?;
            parse_numeric(&text).ok_or_else(|| BinaryError::Invalid(format!("invalid binary numeric: {text}")))?
        }
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            ScalarValue::Utf8(Some(String::from_utf8(raw.to_vec()).map_err(|_| BinaryError::Encoding)?))
        }
        Type::BYTEA => ScalarValue::Binary(Some(raw.to_vec())),
        Type::DATE => {
            let days = i64::from(i32::from_be_bytes(exact(raw)?)) + PG_EPOCH_DAYS;
            ScalarValue::Date32(Some(i32::try_from(days).map_err(|_| invalid("date out of range"))?))
        }
        // `time_recv` accepts 24:00:00 but nothing beyond a day.
        Type::TIME => {
            let micros = i64::from_be_bytes(exact(raw)?);
            if !(0..=USECS_PER_DAY).contains(&micros) {
                return Err(invalid("time out of range"));
            }
            ScalarValue::Time64Microsecond(Some(micros))
        }
        Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(Some(timestamp(raw)?), None),
        Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(Some(timestamp(raw)?), Some("UTC".into())),
        _ => return Err(BinaryError::Unsupported),
    })
}

/// A fixed-size value, which must be exactly `N` bytes.
fn exact<const N: usize>(raw: &[u8]) -> Result<[u8; N], BinaryError> {
    raw.try_into()
        .map_err(|_| BinaryError::Invalid(format!("incorrect binary data format: {} bytes, expected {N}", raw.len())))
}

/// Microseconds since the Unix epoch.
fn timestamp(raw: &[u8]) -> Result<i64, BinaryError> {
    i64::from_be_bytes(exact(raw)?)
        .checked_add(PG_EPOCH_USECS)
        .ok_or_else(|| BinaryError::Invalid("timestamp out of range".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array,
        Int32Array, Int64Array, StringArray, Time64MicrosecondArray, TimestampMicrosecondArray,
    };
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use pgwire::api::portal::Format;

    use super::super::test_support::{code, days, decode_one, hex, micros, portal, row_fields};
    use super::super::{decode_parameters, encode_batch, field_infos};

    #[test]
    fn decodes_binary_parameters() {
        let t = micros(2026, 1, 2, 3, 4, 5, 120_000);
        let cases: Vec<(Type, Vec<u8>, ScalarValue)> = vec![
            (Type::BOOL, vec![1], ScalarValue::Boolean(Some(true))),
            (Type::INT2, hex("fffb"), ScalarValue::Int16(Some(-5))),
            (Type::INT4, hex("0000002a"), ScalarValue::Int32(Some(42))),
            (Type::INT8, hex("7fffffffffffffff"), ScalarValue::Int64(Some(i64::MAX))),
            (Type::OID, hex("ffffffff"), ScalarValue::Int64(Some(4_294_967_295))),
            (Type::FLOAT4, 1.5f32.to_be_bytes().to_vec(), ScalarValue::Float32(Some(1.5))),
            (Type::FLOAT8, 0.1f64.to_be_bytes().to_vec(), ScalarValue::Float64(Some(0.1))),
            (Type::NUMERIC, hex("0002000000000002000c0bb8"), ScalarValue::Decimal128(Some(1230), 4, 2)),
            (Type::NUMERIC, hex("0001ffff00000003000a"), ScalarValue::Decimal128(Some(1), 3, 3)),
            (Type::NUMERIC, hex("00010001400000000064"), ScalarValue::Decimal128(Some(-1_000_000), 7, 0)),
            (Type::NUMERIC, hex("0000000000000002"), ScalarValue::Decimal128(Some(0), 2, 2)),
            (Type::NUMERIC, hex("0001fff6400000260064"), ScalarValue::Decimal128(Some(-1), 38, 38)),
            (
                Type::NUMERIC,
                hex("000a000900000000000c0d801ed204d2162e23340d801ed204d2162e"),
                ScalarValue::Decimal128(Some("12345678901234567890123456789012345678".parse().unwrap()), 38, 0),
            ),
            (
                Type::NUMERIC,
                hex("000500040000000007341a5802e103bb064f"),
                ScalarValue::Decimal128(Some(18_446_744_073_709_551_615), 20, 0),
            ),
            (Type::TEXT, "héllo".as_bytes().to_vec(), ScalarValue::Utf8(Some("héllo".into()))),
            (Type::VARCHAR, b"it''s".to_vec(), ScalarValue::Utf8(Some("it''s".into()))),
            (Type::BYTEA, vec![0, 255], ScalarValue::Binary(Some(vec![0, 255]))),
            (Type::DATE, hex("00000000"), ScalarValue::Date32(Some(10_957))),
            (Type::DATE, hex("fff4da8b"), ScalarValue::Date32(Some(-719_528))),
            (Type::TIME, hex("0000000861cc0920"), ScalarValue::Time64Microsecond(Some(36_000_500_000))),
            (Type::TIMESTAMP, hex("0000000000000000"), ScalarValue::TimestampMicrosecond(Some(PG_EPOCH_USECS), None)),
            (Type::TIMESTAMP, hex("0002ea5dbb16e800"), ScalarValue::TimestampMicrosecond(Some(t), None)),
            (
                Type::TIMESTAMPTZ,
                hex("0002ea5dbb16e800"),
                ScalarValue::TimestampMicrosecond(Some(t), Some("UTC".into())),
            ),
        ];
        for (ty, input, expected) in cases {
            assert_eq!(decode_one(ty.clone(), 1, Some(&input)).unwrap(), expected, "{ty}");
        }
        let ScalarValue::Float64(Some(nan)) = decode_one(Type::NUMERIC, 1, Some(&hex("00000000c0000000"))).unwrap()
        else {
            panic!("NaN numeric is not a Float64");
        };
        assert!(nan.is_nan());
        // u64::MAX with a display scale of 20 needs 40 digits: Float64.
        assert_eq!(
            decode_one(Type::NUMERIC, 1, Some(&hex("000500040000001407341a5802e103bb064f"))).unwrap(),
            ScalarValue::Float64(Some(18446744073709551615.0))
        );
        assert_eq!(code(decode_one(Type::JSON, 1, Some(b"{}"))), "0A000");
    }

    /// What the server sends in binary, a client sends back as a parameter.
    #[test]
    fn binary_results_decode_back_as_parameters() {
        let t = micros(2026, 1, 2, 3, 4, 5, 120_000);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(BooleanArray::from(vec![false])),
            Arc::new(Int16Array::from(vec![-3])),
            Arc::new(Int32Array::from(vec![7])),
            Arc::new(Int64Array::from(vec![-9])),
            Arc::new(Float32Array::from(vec![0.25])),
            Arc::new(Float64Array::from(vec![1e300])),
            Arc::new(StringArray::from(vec!["x y"])),
            Arc::new(BinaryArray::from(vec![&[9u8][..]])),
            Arc::new(Date32Array::from(vec![days(1999, 12, 31)])),
            Arc::new(Time64MicrosecondArray::from(vec![1])),
            Arc::new(TimestampMicrosecondArray::from(vec![t])),
            Arc::new(TimestampMicrosecondArray::from(vec![t]).with_timezone("UTC")),
            Arc::new(Decimal128Array::from(vec![-(i128::MAX / 10)]).with_precision_and_scale(38, 5).unwrap()),
        ];
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new(schema.clone(), columns.clone()).unwrap();
        let fields = Arc::new(field_infos(&schema, &Format::UnifiedBinary).unwrap());
        let row = row_fields(&encode_batch(&batch, &fields).unwrap()[0]);
        let types: Vec<Type> = fields.iter().map(|f| f.datatype().clone()).collect();
        let p = portal(vec![], vec![1], row.iter().map(|v| v.as_deref()).collect());
        let decoded = decode_parameters(&p, &types).unwrap();
        for (column, value) in columns.iter().zip(decoded) {
            let original = ScalarValue::try_from_array(column, 0).unwrap();
            match (original, value) {
                (ScalarValue::Decimal128(a, _, s1), ScalarValue::Decimal128(b, _, s2)) => {
                    assert_eq!((a, s1), (b, s2));
                }
                (original, value) => assert_eq!(original, value),
            }
        }
    }
}
