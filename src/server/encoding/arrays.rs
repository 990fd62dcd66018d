//! Lists as PostgreSQL arrays: one-dimensional with lower bound 1, in the
//! text form of `array_out` (braces, commas, quoting) or the header and
//! length-prefixed elements of `array_send`; a list of lists, maps or structs
//! is an array of `json`.

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, GenericListArray, OffsetSizeTrait};
use pgwire::api::Type;
use pgwire::api::results::FieldFormat;
use pgwire::error::PgWireResult;

use super::json::{is_nested, json_writer};
use super::types::pg_type;
use super::user_error;
use super::value_writer::{ValueWriter, put_length_prefixed};

/// One-dimensional arrays with lower bound 1, as `array_out`/`array_send`
/// write them. `value_writer` makes the elements' writer: the dispatch by type
/// (`writers`), passed in since lists are part of it.
pub(super) fn list_writer<'a, O: OffsetSizeTrait>(
    list: &'a GenericListArray<O>,
    format: FieldFormat,
    value_writer: fn(&'a dyn Array, FieldFormat) -> PgWireResult<ValueWriter<'a>>,
) -> PgWireResult<ValueWriter<'a>> {
    let values = list.values();
    // Lists of lists, maps or structs are arrays of `json`.
    let (element_oid, element) = if is_nested(values.data_type()) {
        (Type::JSON.oid(), json_writer(values.as_ref(), value_writer)?)
    } else {
        (pg_type(values.data_type())?.oid(), value_writer(values.as_ref(), format)?)
    };
    let nulls = values.logical_nulls();
    let offsets = list.value_offsets();
    Ok(Box::new(move |i, buf| {
        let (start, end) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
        let is_null = |j: usize| nulls.as_ref().is_some_and(|n| n.is_null(j));
        if format == FieldFormat::Text {
            buf.put_u8(b'{');
            for j in start..end {
                if j > start {
                    buf.put_u8(b',');
                }
                if is_null(j) {
                    buf.put_slice(b"NULL");
                } else {
                    let from = buf.len();
                    element(j, buf)?;
                    quote_array_element(buf, from);
                }
            }
            buf.put_u8(b'}');
        } else {
            let len = i32::try_from(end - start)
                .map_err(|_| user_error("54000", "array size exceeds the maximum allowed"))?;
            buf.put_i32(i32::from(len > 0));
            buf.put_i32(i32::from((start..end).any(is_null)));
            buf.put_u32(element_oid);
            if len > 0 {
                buf.put_i32(len);
                buf.put_i32(1);
            }
            for j in start..end {
                if is_null(j) {
                    buf.put_i32(-1);
                } else {
                    put_length_prefixed(buf, |b| element(j, b))?;
                }
            }
        }
        Ok(())
    }))
}

/// Quotes the element written at `buf[from..]` when `array_out` would: empty,
/// `NULL` in any case, or containing a delimiter, brace, quote, backslash or
/// whitespace.
fn quote_array_element(buf: &mut BytesMut, from: usize) {
    let element = &buf[from..];
    let needs_quotes = element.is_empty()
        || element.eq_ignore_ascii_case(b"NULL")
        || element
            .iter()
            .any(|&c| matches!(c, b'{' | b'}' | b',' | b'"' | b'\\' | b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c));
    if needs_quotes {
        let element = element.to_vec();
        buf.truncate(from);
        buf.put_u8(b'"');
        for c in element {
            if c == b'"' || c == b'\\' {
                buf.put_u8(b'\\');
            }
            buf.put_u8(c);
        }
        buf.put_u8(b'"');
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, BinaryArray, BooleanArray, Decimal128Array, LargeListArray, ListArray, ListBuilder, StringBuilder,
        TimestampMicrosecondArray,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int16Type, Int32Type, TimeUnit};

    use super::super::test_support::{binary, hex, hexes, micros, text, texts};

    #[test]
    fn encodes_arrays_like_array_out_and_array_send() {
        let int2: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int16Type, _, _>(vec![
            Some(vec![Some(1), Some(2), None]),
            Some(vec![]),
            None,
        ]));
        assert_eq!(text(int2.clone()), vec![Some("{1,2,NULL}".into()), Some("{}".into()), None]);
        assert_eq!(
            binary(int2),
            vec![
                Some(hex("0000000100000001000000150000000300000001000000020001000000020002ffffffff")),
                Some(hex("000000000000000000000015")),
                None
            ]
        );
        let empty_int4: ArrayRef =
            Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(Vec::<Option<i32>>::new())]));
        assert_eq!(binary(empty_int4), hexes(&["000000000000000000000017"]));

        let mut builder = ListBuilder::new(StringBuilder::new());
        builder.append_value(["a", "", "NULL", "null", "a b", "a\"b", "a\\b", "{x}", "a,b", " "].map(Some));
        builder.append_value([Some("a"), Some("bc")]);
        let strings: ArrayRef = Arc::new(builder.finish());
        assert_eq!(
            text(strings.clone()),
            texts(&[r#"{a,"","NULL","null","a b","a\"b","a\\b","{x}","a,b"," "}"#, "{a,bc}"])
        );
        assert_eq!(binary(strings)[1], Some(hex("00000001000000000000001900000002000000010000000161000000026263")));

        let float8: ArrayRef =
            Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(vec![Some(vec![Some(1.5)])]));
        assert_eq!(text(float8.clone()), texts(&["{1.5}"]));
        assert_eq!(binary(float8), hexes(&["0000000100000000000002bd0000000100000001000000083ff8000000000000"]));

        let bools = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(0), None])]);
        let bools: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Boolean, true)),
            bools.offsets().clone(),
            Arc::new(BooleanArray::from(vec![Some(true), None])),
            None,
        ));
        assert_eq!(text(bools.clone()), texts(&["{t,NULL}"]));
        assert_eq!(binary(bools), hexes(&["00000001000000010000001000000002000000010000000101ffffffff"]));

        let numerics: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Decimal128(10, 2), true)),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([1]),
            Arc::new(Decimal128Array::from(vec![1230]).with_precision_and_scale(10, 2).unwrap()),
            None,
        ));
        assert_eq!(text(numerics.clone()), texts(&["{12.30}"]));
        assert_eq!(
            binary(numerics),
            hexes(&["0000000100000000000006a400000001000000010000000c0002000000000002000c0bb8"])
        );

        let bytea: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Binary, true)),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([1]),
            Arc::new(BinaryArray::from(vec![&[1u8, 2][..]])),
            None,
        ));
        assert_eq!(text(bytea.clone()), texts(&[r#"{"\\x0102"}"#]));
        assert_eq!(binary(bytea), hexes(&["0000000100000000000000110000000100000001000000020102"]));

        let timestamps: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Timestamp(TimeUnit::Microsecond, None), true)),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([1]),
            Arc::new(TimestampMicrosecondArray::from(vec![micros(2026, 1, 2, 3, 4, 5, 0)])),
            None,
        ));
        assert_eq!(text(timestamps.clone()), texts(&[r#"{"2026-01-02 03:04:05"}"#]));
        assert_eq!(binary(timestamps), hexes(&["00000001000000000000045a0000000100000001000000080002ea5dbb151340"]));
    }
}
