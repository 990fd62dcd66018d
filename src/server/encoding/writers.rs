//! Result rows as `DataRow`s: one writer per column, built once from the
//! downcast Arrow array and then called for each row, writing the value's
//! text or binary form. Numerics, floats, dates and times, arrays and JSON have
//! their own files; this one holds the dispatch and the simple types.

use std::fmt;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, ArrowPrimitiveType, AsArray, PrimitiveArray};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float16Type,
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, IntervalDayTimeType, IntervalMonthDayNanoType,
    IntervalUnit, IntervalYearMonthType, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::arrow::record_batch::RecordBatch;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;

use super::arrays::list_writer;
use super::datetime::{MSECS_PER_DAY, USECS_PER_SEC, date_writer, interval_writer, time_writer, timestamp_writer};
use super::float::write_float;
use super::json::json_writer;
use super::numeric::{decimal_writer, decimal256_writer};
use super::types::unsupported_type;
use super::user_error;
use super::value_writer::{ValueWriter, put_display, put_length_prefixed};

/// Encodes every row of `batch`. The Arrow type of each column decides the
/// encoding and `fields` only the text/binary choice, so `fields` must come
/// from [`field_infos`] for the batch's schema.
pub fn encode_batch(batch: &RecordBatch, fields: &Arc<Vec<FieldInfo>>) -> PgWireResult<Vec<DataRow>> {
    if fields.len() != batch.num_columns() {
        return Err(user_error(
            "XX000",
            format!("row description has {} fields but the result has {} columns", fields.len(), batch.num_columns()),
        ));
    }
    let field_count =
        i16::try_from(fields.len()).map_err(|_| user_error("54000", "target lists can have at most 32767 entries"))?;
    let mut rows: Vec<BytesMut> = (0..batch.num_rows()).map(|_| BytesMut::with_capacity(8 * fields.len())).collect();
    for (column, field) in batch.columns().iter().zip(fields.iter()) {
        let write = value_writer(column.as_ref(), field.format())?;
        let nulls = column.logical_nulls();
        for (i, row) in rows.iter_mut().enumerate() {
            if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                row.put_i32(-1);
            } else {
                put_length_prefixed(row, |buf| write(i, buf))?;
            }
        }
    }
    Ok(rows.into_iter().map(|data| DataRow::new(data, field_count)).collect())
}

fn value_writer<'a>(array: &'a dyn Array, format: FieldFormat) -> PgWireResult<ValueWriter<'a>> {
    let text = format == FieldFormat::Text;
    Ok(match array.data_type() {
        DataType::Null => Box::new(|_, _| Ok(())),
        DataType::Boolean => {
            let a = array.as_boolean();
            Box::new(move |i, buf| {
                let v = a.value(i);
                buf.put_u8(match (text, v) {
                    (true, true) => b't',
                    (true, false) => b'f',
                    (false, v) => u8::from(v),
                });
                Ok(())
            })
        }
        DataType::Int8 => int_writer(array.as_primitive::<Int8Type>(), text, i16::from, BytesMut::put_i16),
        DataType::Int16 => int_writer(array.as_primitive::<Int16Type>(), text, i16::from, BytesMut::put_i16),
        DataType::UInt8 => int_writer(array.as_primitive::<UInt8Type>(), text, i16::from, BytesMut::put_i16),
        DataType::Int32 => int_writer(array.as_primitive::<Int32Type>(), text, i32::from, BytesMut::put_i32),
        DataType::UInt16 => int_writer(array.as_primitive::<UInt16Type>(), text, i32::from, BytesMut::put_i32),
        DataType::Int64 => int_writer(array.as_primitive::<Int64Type>(), text, i64::from, BytesMut::put_i64),
        DataType::UInt32 => int_writer(array.as_primitive::<UInt32Type>(), text, i64::from, BytesMut::put_i64),
        DataType::UInt64 => decimal_writer(array.as_primitive::<UInt64Type>(), 0, text, i128::from),
        DataType::Float16 => {
            let a = array.as_primitive::<Float16Type>();
            float4_writer(move |i| a.value(i).to_f32(), text)
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            float4_writer(move |i| a.value(i), text)
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            Box::new(move |i, buf| {
                let v = a.value(i);
                if text {
                    write_float(buf, v);
                } else {
                    buf.put_f64(v);
                }
                Ok(())
            })
        }
        DataType::Decimal32(_, s) => decimal_writer(array.as_primitive::<Decimal32Type>(), *s, text, i128::from),
        DataType::Decimal64(_, s) => decimal_writer(array.as_primitive::<Decimal64Type>(), *s, text, i128::from),
        DataType::Decimal128(_, s) => decimal_writer(array.as_primitive::<Decimal128Type>(), *s, text, |v| v),
        DataType::Decimal256(_, s) => decimal256_writer(array.as_primitive::<Decimal256Type>(), *s, text),
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            raw_writer(move |i| a.value(i).as_bytes())
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            raw_writer(move |i| a.value(i).as_bytes())
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            raw_writer(move |i| a.value(i).as_bytes())
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            bytea_writer(move |i| a.value(i), text)
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            bytea_writer(move |i| a.value(i), text)
        }
        DataType::BinaryView => {
            let a = array.as_binary_view();
            bytea_writer(move |i| a.value(i), text)
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            bytea_writer(move |i| a.value(i), text)
        }
        DataType::Date32 => {
            let a = array.as_primitive::<Date32Type>();
            date_writer(move |i| i64::from(a.value(i)), text)
        }
        DataType::Date64 => {
            let a = array.as_primitive::<Date64Type>();
            date_writer(move |i| a.value(i).div_euclid(MSECS_PER_DAY), text)
        }
        DataType::Time32(TimeUnit::Second) => {
            let a = array.as_primitive::<Time32SecondType>();
            time_writer(move |i| i64::from(a.value(i)) * USECS_PER_SEC, text)
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let a = array.as_primitive::<Time32MillisecondType>();
            time_writer(move |i| i64::from(a.value(i)) * 1000, text)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let a = array.as_primitive::<Time64MicrosecondType>();
            time_writer(move |i| a.value(i), text)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            let a = array.as_primitive::<Time64NanosecondType>();
            time_writer(move |i| a.value(i).div_euclid(1000), text)
        }
        DataType::Timestamp(unit, tz) => {
            let with_tz = tz.is_some();
            match unit {
                TimeUnit::Second => {
                    let a = array.as_primitive::<TimestampSecondType>();
                    timestamp_writer(move |i| a.value(i).checked_mul(USECS_PER_SEC), text, with_tz)
                }
                TimeUnit::Millisecond => {
                    let a = array.as_primitive::<TimestampMillisecondType>();
                    timestamp_writer(move |i| a.value(i).checked_mul(1000), text, with_tz)
                }
                TimeUnit::Microsecond => {
                    let a = array.as_primitive::<TimestampMicrosecondType>();
                    timestamp_writer(move |i| Some(a.value(i)), text, with_tz)
                }
                TimeUnit::Nanosecond => {
                    let a = array.as_primitive::<TimestampNanosecondType>();
                    timestamp_writer(move |i| Some(a.value(i).div_euclid(1000)), text, with_tz)
                }
            }
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            let a = array.as_primitive::<IntervalYearMonthType>();
            interval_writer(move |i| Some((a.value(i), 0, 0)), text)
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let a = array.as_primitive::<IntervalDayTimeType>();
            interval_writer(
                move |i| {
                    let v = a.value(i);
                    Some((0, v.days, i64::from(v.milliseconds) * 1000))
                },
                text,
            )
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let a = array.as_primitive::<IntervalMonthDayNanoType>();
            interval_writer(
                move |i| {
                    let v = a.value(i);
                    Some((v.months, v.days, v.nanoseconds / 1000))
                },
                text,
            )
        }
        DataType::Duration(TimeUnit::Second) => {
            let a = array.as_primitive::<DurationSecondType>();
            interval_writer(move |i| Some((0, 0, a.value(i).checked_mul(USECS_PER_SEC)?)), text)
        }
        DataType::Duration(TimeUnit::Millisecond) => {
            let a = array.as_primitive::<DurationMillisecondType>();
            interval_writer(move |i| Some((0, 0, a.value(i).checked_mul(1000)?)), text)
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            let a = array.as_primitive::<DurationMicrosecondType>();
            interval_writer(move |i| Some((0, 0, a.value(i))), text)
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            let a = array.as_primitive::<DurationNanosecondType>();
            interval_writer(move |i| Some((0, 0, a.value(i) / 1000)), text)
        }
        DataType::Map(..) | DataType::Struct(_) => json_writer(array, value_writer)?,
        DataType::List(_) => list_writer(array.as_list::<i32>(), format, value_writer)?,
        DataType::LargeList(_) => list_writer(array.as_list::<i64>(), format, value_writer)?,
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let values = dict.values();
            let inner = value_writer(values.as_ref(), format)?;
            // `normalized_keys` panics on an empty dictionary, whose keys are
            // then all null and never looked up.
            let keys = if values.is_empty() { Vec::new() } else { dict.normalized_keys() };
            Box::new(move |i, buf| {
                let key = *keys.get(i).ok_or_else(|| user_error("XX000", "dictionary key out of range"))?;
                inner(key, buf)
            })
        }
        dt => return Err(unsupported_type(dt)),
    })
}

fn int_writer<'a, T, W>(
    a: &'a PrimitiveArray<T>,
    text: bool,
    widen: fn(T::Native) -> W,
    put: fn(&mut BytesMut, W),
) -> ValueWriter<'a>
where
    T: ArrowPrimitiveType,
    W: fmt::Display + 'a,
{
    Box::new(move |i, buf| {
        let v = widen(a.value(i));
        if text {
            put_display(buf, v);
        } else {
            put(buf, v);
        }
        Ok(())
    })
}

fn float4_writer<'a>(value: impl Fn(usize) -> f32 + 'a, text: bool) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let v = value(i);
        if text {
            write_float(buf, v);
        } else {
            buf.put_f32(v);
        }
        Ok(())
    })
}
/// Text and binary are the same bytes for text types.
fn raw_writer<'a>(value: impl Fn(usize) -> &'a [u8] + 'a) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        buf.put_slice(value(i));
        Ok(())
    })
}

fn bytea_writer<'a>(value: impl Fn(usize) -> &'a [u8] + 'a, text: bool) -> ValueWriter<'a> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Box::new(move |i, buf| {
        let bytes = value(i);
        if text {
            buf.reserve(2 + 2 * bytes.len());
            buf.put_slice(b"\\x");
            for &b in bytes {
                buf.put_u8(HEX[usize::from(b >> 4)]);
                buf.put_u8(HEX[usize::from(b & 0xf)]);
            }
        } else {
            buf.put_slice(bytes);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::arrow::array::{
        ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Decimal128Array, DictionaryArray, FixedSizeBinaryArray,
        Int8Array, Int16Array, Int32Array, Int64Array, LargeBinaryArray, LargeStringArray, NullArray, StringArray,
        StringViewArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
    };
    use datafusion::arrow::datatypes::{Field, Schema};
    use pgwire::api::portal::Format;

    use super::super::field_infos;
    use super::super::test_support::{binary, code, hex, hexes, row_fields, text, texts};

    #[test]
    fn encodes_booleans_and_integers() {
        let bools: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]));
        assert_eq!(text(bools.clone()), vec![Some("t".into()), Some("f".into()), None]);
        assert_eq!(binary(bools), vec![Some(vec![1]), Some(vec![0]), None]);

        let int8: ArrayRef = Arc::new(Int8Array::from(vec![Some(-5), None, Some(127)]));
        assert_eq!(text(int8.clone()), vec![Some("-5".into()), None, Some("127".into())]);
        // Two bytes: int2, not postgres-types' one-byte "char".
        assert_eq!(binary(int8), vec![Some(hex("fffb")), None, Some(hex("007f"))]);

        let cases: Vec<(ArrayRef, &str, &str)> = vec![
            (Arc::new(Int16Array::from(vec![-32768])), "-32768", "8000"),
            (Arc::new(UInt8Array::from(vec![255])), "255", "00ff"),
            (Arc::new(Int32Array::from(vec![-2])), "-2", "fffffffe"),
            (Arc::new(UInt16Array::from(vec![65535])), "65535", "0000ffff"),
            (Arc::new(Int64Array::from(vec![i64::MAX])), "9223372036854775807", "7fffffffffffffff"),
            (Arc::new(UInt32Array::from(vec![u32::MAX])), "4294967295", "00000000ffffffff"),
            // numeric_send(18446744073709551615::numeric)
            (
                Arc::new(UInt64Array::from(vec![u64::MAX])),
                "18446744073709551615",
                "000500040000000007341a5802e103bb064f",
            ),
        ];
        for (array, expected_text, expected_binary) in cases {
            assert_eq!(text(array.clone()), texts(&[expected_text]), "{}", array.data_type());
            assert_eq!(binary(array.clone()), hexes(&[expected_binary]), "{}", array.data_type());
        }
    }

    #[test]
    fn encodes_strings_and_bytea() {
        let strings: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("héllo"), None, Some("")])),
            Arc::new(LargeStringArray::from(vec![Some("héllo"), None, Some("")])),
            Arc::new(StringViewArray::from(vec![Some("héllo"), None, Some("")])),
        ];
        for array in strings {
            assert_eq!(text(array.clone()), vec![Some("héllo".into()), None, Some(String::new())]);
            assert_eq!(binary(array), vec![Some("héllo".as_bytes().to_vec()), None, Some(vec![])]);
        }
        let bytes: &[u8] = &[0xde, 0xad, 0x01];
        let binaries: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from(vec![Some(bytes), None, Some(&[][..])])),
            Arc::new(LargeBinaryArray::from(vec![Some(bytes), None, Some(&[][..])])),
            Arc::new(BinaryViewArray::from(vec![Some(bytes), None, Some(&[][..])])),
        ];
        for array in binaries {
            assert_eq!(text(array.clone()), vec![Some("\\xdead01".into()), None, Some("\\x".into())]);
            assert_eq!(binary(array), vec![Some(bytes.to_vec()), None, Some(vec![])]);
        }
        let fixed: ArrayRef =
            Arc::new(FixedSizeBinaryArray::try_from_iter(vec![vec![0xab, 0x0f]].into_iter()).unwrap());
        assert_eq!(text(fixed.clone()), texts(&["\\xab0f"]));
        assert_eq!(binary(fixed), hexes(&["ab0f"]));
    }

    #[test]
    fn encodes_dictionaries_null_columns_and_mixed_formats() {
        let dict: ArrayRef =
            Arc::new(DictionaryArray::<Int32Type>::from_iter(vec![Some("a"), None, Some("b"), Some("a")]));
        assert_eq!(text(dict.clone()), vec![Some("a".into()), None, Some("b".into()), Some("a".into())]);
        assert_eq!(binary(dict), vec![Some(b"a".to_vec()), None, Some(b"b".to_vec()), Some(b"a".to_vec())]);
        let nulls: ArrayRef = Arc::new(NullArray::new(2));
        assert_eq!(text(nulls), vec![None, None]);

        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("x"), None])),
                Arc::new(Decimal128Array::from(vec![Some(1230), None]).with_precision_and_scale(10, 2).unwrap()),
            ],
        )
        .unwrap();
        let fields = Arc::new(field_infos(&schema, &Format::Individual(vec![1, 0, 1])).unwrap());
        let rows = encode_batch(&batch, &fields).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.field_count == 3));
        assert_eq!(
            row_fields(&rows[0]),
            vec![Some(hex("00000001")), Some(b"x".to_vec()), Some(hex("0002000000000002000c0bb8"))]
        );
        assert_eq!(row_fields(&rows[1]), vec![Some(hex("00000002")), None, None]);

        let too_few = Arc::new(fields[..2].to_vec());
        assert_eq!(code(encode_batch(&batch, &too_few)), "XX000");
    }
}
