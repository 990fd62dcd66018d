//! Maps and structs, and lists that hold lists, maps or structs, as `json` text: PostgreSQL has
//! no type for them that every driver reads, and every driver reads `json`. A struct is an
//! object keyed by field name, a map an object keyed by each key's text form (in the map's
//! order), a list an array. Numbers and booleans are bare; NaN and the infinities, which JSON
//! has no numbers for, are strings, as are all other values, in their PostgreSQL text form.
//! `json`'s binary form is this same text.

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, AsArray, OffsetSizeTrait};
use datafusion::arrow::datatypes::DataType;
use pgwire::api::results::FieldFormat;
use pgwire::error::PgWireResult;

use super::value_writer::ValueWriter;
use crate::sql::pg_catalog::functions::write_json_string;

/// Whether values of `dt` go out as JSON, alone or as the elements of an array.
pub(super) fn is_nested(dt: &DataType) -> bool {
    matches!(dt, DataType::List(_) | DataType::LargeList(_) | DataType::Map(..) | DataType::Struct(_))
}

/// Writes the JSON text of each value of `array`. `value_writer` gives the text form of the
/// scalars inside (the dispatch by type in `writers`).
pub(super) fn json_writer<'a>(
    array: &'a dyn Array,
    value_writer: fn(&'a dyn Array, FieldFormat) -> PgWireResult<ValueWriter<'a>>,
) -> PgWireResult<ValueWriter<'a>> {
    let nulls = array.logical_nulls();
    let value = json_value_writer(array, value_writer)?;
    Ok(Box::new(move |i, buf| {
        if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            buf.put_slice(b"null");
            Ok(())
        } else {
            value(i, buf)
        }
    }))
}

fn json_value_writer<'a>(
    array: &'a dyn Array,
    value_writer: fn(&'a dyn Array, FieldFormat) -> PgWireResult<ValueWriter<'a>>,
) -> PgWireResult<ValueWriter<'a>> {
    Ok(match array.data_type() {
        DataType::Struct(fields) => {
            let array = array.as_struct();
            let members = fields
                .iter()
                .zip(array.columns())
                .map(|(field, column)| Ok((field.name().as_str(), json_writer(column.as_ref(), value_writer)?)))
                .collect::<PgWireResult<Vec<_>>>()?;
            Box::new(move |i, buf| {
                buf.put_u8(b'{');
                for (n, (name, member)) in members.iter().enumerate() {
                    if n > 0 {
                        buf.put_u8(b',');
                    }
                    write_json_string(buf, name);
                    buf.put_u8(b':');
                    member(i, buf)?;
                }
                buf.put_u8(b'}');
                Ok(())
            })
        }
        DataType::Map(..) => {
            let map = array.as_map();
            let key = value_writer(map.keys().as_ref(), FieldFormat::Text)?;
            let value = json_writer(map.values().as_ref(), value_writer)?;
            let offsets = map.value_offsets();
            Box::new(move |i, buf| {
                buf.put_u8(b'{');
                let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
                for j in start..end {
                    if j > start {
                        buf.put_u8(b',');
                    }
                    let from = buf.len();
                    key(j, buf)?;
                    quote_from(buf, from);
                    buf.put_u8(b':');
                    value(j, buf)?;
                }
                buf.put_u8(b'}');
                Ok(())
            })
        }
        DataType::List(_) => list(array.as_list::<i32>(), value_writer)?,
        DataType::LargeList(_) => list(array.as_list::<i64>(), value_writer)?,
        DataType::Null => Box::new(|_, buf| {
            buf.put_slice(b"null");
            Ok(())
        }),
        DataType::Boolean => {
            let array = array.as_boolean();
            Box::new(move |i, buf| {
                buf.put_slice(if array.value(i) { b"true" } else { b"false" });
                Ok(())
            })
        }
        dt => {
            let bare = dt.is_integer() || dt.is_floating() || dt.is_decimal();
            let text = value_writer(array, FieldFormat::Text)?;
            Box::new(move |i, buf| {
                let from = buf.len();
                text(i, buf)?;
                if !bare || matches!(&buf[from..], b"NaN" | b"Infinity" | b"-Infinity") {
                    quote_from(buf, from);
                }
                Ok(())
            })
        }
    })
}

fn list<'a, O: OffsetSizeTrait>(
    list: &'a datafusion::arrow::array::GenericListArray<O>,
    value_writer: fn(&'a dyn Array, FieldFormat) -> PgWireResult<ValueWriter<'a>>,
) -> PgWireResult<ValueWriter<'a>> {
    let element = json_writer(list.values().as_ref(), value_writer)?;
    let offsets = list.value_offsets();
    Ok(Box::new(move |i, buf| {
        buf.put_u8(b'[');
        let (start, end) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
        for j in start..end {
            if j > start {
                buf.put_u8(b',');
            }
            element(j, buf)?;
        }
        buf.put_u8(b']');
        Ok(())
    }))
}

/// Makes the text written at `buf[from..]` a JSON string.
fn quote_from(buf: &mut BytesMut, from: usize) {
    let text = buf.split_off(from);
    write_json_string(buf, &String::from_utf8_lossy(&text));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Builder, ListArray, MapBuilder, StringArray,
        StringBuilder, StructArray,
    };
    use datafusion::arrow::datatypes::{Field, Int32Type};

    use super::super::test_support::{binary, text, texts};
    use super::*;

    #[test]
    fn structs_and_maps_are_json_objects_in_text_and_binary() {
        let strukt: ArrayRef = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("a", DataType::Int32, true)),
                Arc::new(Int32Array::from(vec![Some(1), None])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("b \"q\"", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("x\ny"), Some("\\")])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c", DataType::Float64, true)),
                Arc::new(Float64Array::from(vec![f64::NAN, 2.5])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("d", DataType::Boolean, true)),
                Arc::new(BooleanArray::from(vec![true, false])) as ArrayRef,
            ),
        ]));
        let expected = texts(&[
            r#"{"a":1,"b \"q\"":"x\ny","c":"NaN","d":true}"#,
            r#"{"a":null,"b \"q\"":"\\","c":2.5,"d":false}"#,
        ]);
        assert_eq!(text(strukt.clone()), expected);
        let bytes: Vec<Option<String>> =
            binary(strukt).into_iter().map(|v| v.map(|b| String::from_utf8(b).unwrap())).collect();
        assert_eq!(bytes, expected);

        let mut map = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
        map.keys().append_value("k");
        map.values().append_value(7);
        map.keys().append_value("n");
        map.values().append_null();
        map.append(true).unwrap();
        map.append(false).unwrap();
        map.append(true).unwrap();
        let map: ArrayRef = Arc::new(map.finish());
        assert_eq!(text(map), vec![Some(r#"{"k":7,"n":null}"#.into()), None, Some("{}".into())]);
    }

    #[test]
    fn lists_inside_json_are_json_arrays() {
        let inner = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), None]), Some(vec![])]);
        let outer: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("element", inner.data_type().clone(), true)),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([2]),
            Arc::new(inner),
            None,
        ));
        assert_eq!(text(outer), texts(&[r#"{"[1,null]",[]}"#]));
    }
}
