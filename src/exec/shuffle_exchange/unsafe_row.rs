//! The size rows take in Spark's `UnsafeRow` format, which a shuffle stage's statistics count.
//!
//! Spark's `UnsafeRowSerializer` adds each written row's `getSizeInBytes` to the exchange's
//! `dataSize` metric, and a materialized shuffle stage reports `Statistics(sizeInBytes =
//! dataSize)`: the figure adaptive execution compares with the broadcast threshold and EXPLAIN
//! prints. A row is a null bit set (a word per 64 fields), one word per field, and the
//! variable-length values after them, each rounded up to a word: strings and binaries, decimals
//! of more than 18 digits (16 bytes, null or not), and nested rows, arrays and maps in their own
//! unsafe layouts. Counting it from the batches gives Spark's figure exactly for flat rows,
//! whatever the batch sizes, where the batches' memory size varies from run to run.

use datafusion::arrow::array::{Array, AsArray, OffsetSizeTrait, RecordBatch};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field};

const WORD: u64 = 8;

/// The bytes `batch`'s rows take as `UnsafeRow`s.
pub fn unsafe_row_bytes(batch: &RecordBatch) -> u64 {
    let fixed = row_header_bytes(batch.num_columns()) * batch.num_rows() as u64;
    fixed + batch.columns().iter().map(|column| variable_bytes(column.as_ref())).sum::<u64>()
}

/// A row's null bit set and fixed-length slots.
fn row_header_bytes(fields: usize) -> u64 {
    bit_set_words(fields) * WORD + fields as u64 * WORD
}

fn bit_set_words(fields: usize) -> u64 {
    (fields as u64).div_ceil(64)
}

fn round_to_word(bytes: u64) -> u64 {
    bytes.div_ceil(WORD) * WORD
}

/// The variable-length bytes of every value of `array`, summed.
fn variable_bytes(array: &dyn Array) -> u64 {
    match array.data_type() {
        // Null or not, a wide decimal keeps its 16 bytes.
        DataType::Decimal128(precision, _) | DataType::Decimal256(precision, _) if *precision > 18 => {
            2 * WORD * array.len() as u64
        }
        DataType::Utf8 => offset_bytes(array.as_string::<i32>().offsets(), array.nulls()),
        DataType::LargeUtf8 => offset_bytes(array.as_string::<i64>().offsets(), array.nulls()),
        DataType::Binary => offset_bytes(array.as_binary::<i32>().offsets(), array.nulls()),
        DataType::LargeBinary => offset_bytes(array.as_binary::<i64>().offsets(), array.nulls()),
        data_type if !is_fixed_length(data_type) => {
            (0..array.len()).filter(|&row| array.is_valid(row)).map(|row| value_bytes(array, row)).sum()
        }
        _ => 0,
    }
}

/// The bytes of strings or binaries, each value's rounded up to a word, straight from their
/// offsets, the common case, rather than downcasting the array for every value.
fn offset_bytes<O: OffsetSizeTrait>(offsets: &OffsetBuffer<O>, nulls: Option<&NullBuffer>) -> u64 {
    let lengths = offsets.windows(2).map(|ends| round_to_word((ends[1] - ends[0]).as_usize() as u64));
    match nulls.filter(|nulls| nulls.null_count() > 0) {
        None => lengths.sum(),
        Some(nulls) => lengths.zip(nulls.iter()).filter(|(_, valid)| *valid).map(|(bytes, _)| bytes).sum(),
    }
}

fn is_nested(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Map(..)
            | DataType::Dictionary(..)
    )
}

/// Whether Spark keeps a value of this type in the row's own slot.
fn is_fixed_length(data_type: &DataType) -> bool {
    match data_type {
        DataType::Decimal128(precision, _) | DataType::Decimal256(precision, _) => *precision <= 18,
        DataType::Dictionary(_, value) => is_fixed_length(value),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => false,
        data_type => !is_nested(data_type),
    }
}

/// The variable-length bytes of the value at `row` (not null), rounded to words.
fn value_bytes(array: &dyn Array, row: usize) -> u64 {
    match array.data_type() {
        DataType::Utf8 => round_to_word(array.as_string::<i32>().value(row).len() as u64),
        DataType::LargeUtf8 => round_to_word(array.as_string::<i64>().value(row).len() as u64),
        DataType::Utf8View => round_to_word(array.as_string_view().value(row).len() as u64),
        DataType::Binary => round_to_word(array.as_binary::<i32>().value(row).len() as u64),
        DataType::LargeBinary => round_to_word(array.as_binary::<i64>().value(row).len() as u64),
        DataType::BinaryView => round_to_word(array.as_binary_view().value(row).len() as u64),
        DataType::Decimal128(..) | DataType::Decimal256(..) => 2 * WORD,
        DataType::Struct(_) => {
            let fields = array.as_struct();
            let nested = fields.columns().iter().map(|column| slot_bytes(column.as_ref(), row)).sum::<u64>();
            row_header_bytes(fields.num_columns()) + nested
        }
        DataType::List(item) => {
            let list = array.as_list::<i32>();
            array_bytes(list.value(row).as_ref(), item)
        }
        DataType::LargeList(item) => {
            let list = array.as_list::<i64>();
            array_bytes(list.value(row).as_ref(), item)
        }
        DataType::FixedSizeList(item, _) => array_bytes(array.as_fixed_size_list().value(row).as_ref(), item),
        // An `UnsafeMapData`: the keys' array size, then the keys and the values as arrays.
        DataType::Map(entries, _) => {
            let entries_of_row = array.as_map().value(row);
            let DataType::Struct(fields) = entries.data_type() else { return 0 };
            let [key, value] = [0, 1].map(|i| (entries_of_row.column(i), &fields[i]));
            WORD + array_bytes(key.0.as_ref(), key.1) + array_bytes(value.0.as_ref(), value.1)
        }
        DataType::Dictionary(..) => {
            let dictionary = array.as_any_dictionary();
            let key = dictionary.normalized_keys()[row];
            value_bytes(dictionary.values().as_ref(), key)
        }
        _ => 0,
    }
}

/// The variable-length bytes a nested value at `row` adds beyond its slot (0 when null).
fn slot_bytes(array: &dyn Array, row: usize) -> u64 {
    if is_fixed_length(array.data_type()) || array.is_null(row) { 0 } else { value_bytes(array, row) }
}

/// An `UnsafeArrayData`: the element count, a null bit set, the elements' slots (a word for
/// each variable-length one), rounded to a word, then the variable-length elements.
fn array_bytes(elements: &dyn Array, item: &Field) -> u64 {
    let count = elements.len();
    let slot = if is_fixed_length(item.data_type()) { fixed_width(item.data_type()) } else { WORD };
    let header = WORD + bit_set_words(count) * WORD;
    let slots = round_to_word(slot * count as u64);
    header + slots + (0..count).map(|row| slot_bytes(elements, row)).sum::<u64>()
}

/// An array element's width in its slot: Spark packs arrays by the element type's size.
fn fixed_width(data_type: &DataType) -> u64 {
    match data_type {
        DataType::Boolean | DataType::Int8 | DataType::UInt8 | DataType::Null => 1,
        DataType::Int16 | DataType::UInt16 => 2,
        DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Date32 => 4,
        _ => WORD,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, Decimal128Array, Int32Array, Int64Array, ListArray, StringArray, StructArray,
    };
    use datafusion::arrow::datatypes::{Int32Type, Schema};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> =
            columns.iter().map(|(name, array)| Field::new(*name, array.data_type().clone(), true)).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a)| a).collect())
            .expect("a batch")
    }

    /// Spark's own figures: `Statistics(sizeInBytes=240.0 B, rowCount=10)` for ten rows of two
    /// BIGINTs, and 24 bytes a row for 500 such rows (11.7 KiB).
    #[test]
    fn two_longs_take_three_words() {
        let longs: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
        assert_eq!(unsafe_row_bytes(&batch(vec![("a", Arc::clone(&longs)), ("z", longs)])), 240);
    }

    /// Strings take their bytes rounded to a word; nulls take nothing past their slot.
    #[test]
    fn strings_are_rounded_to_words() {
        let strings: ArrayRef = Arc::new(StringArray::from(vec![Some(""), Some("abc"), None, Some("123456789")]));
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3, 4]));
        // Four rows of a bit-set word and two slots, then 0 + 8 + 0 + 16 bytes.
        assert_eq!(unsafe_row_bytes(&batch(vec![("s", strings), ("i", ints)])), 4 * 24 + 24);
    }

    /// A wide decimal keeps 16 bytes even when null; a narrow one lives in its slot.
    #[test]
    fn wide_decimals_take_sixteen_bytes() {
        let wide: ArrayRef =
            Arc::new(Decimal128Array::from(vec![Some(1), None]).with_precision_and_scale(38, 2).expect("a type"));
        let narrow: ArrayRef =
            Arc::new(Decimal128Array::from(vec![Some(1), None]).with_precision_and_scale(18, 2).expect("a type"));
        assert_eq!(unsafe_row_bytes(&batch(vec![("w", wide)])), 2 * 16 + 2 * 16);
        assert_eq!(unsafe_row_bytes(&batch(vec![("n", narrow)])), 2 * 16);
    }

    /// Sixty-five fields need two words of null bits.
    #[test]
    fn wide_rows_have_more_null_words() {
        let longs: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1));
        let columns = (0..65).map(|_| ("c", Arc::clone(&longs))).collect();
        assert_eq!(unsafe_row_bytes(&batch(columns)), 2 * 8 + 65 * 8);
    }

    /// An array of three INTs: count and null words, 12 bytes of slots rounded to 16.
    #[test]
    fn arrays_are_packed_by_element_width() {
        let list: ArrayRef =
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), Some(2), Some(3)])]));
        assert_eq!(unsafe_row_bytes(&batch(vec![("l", list)])), 16 + 8 + 8 + 16);
    }

    /// A struct of a BIGINT and a string is a nested row: its header, slots and the string.
    #[test]
    fn structs_are_nested_rows() {
        let fields = StructArray::from(vec![
            (Arc::new(Field::new("n", DataType::Int64, true)), Arc::new(Int64Array::from(vec![7])) as ArrayRef),
            (
                Arc::new(Field::new("s", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec!["abcdefghi"])) as ArrayRef,
            ),
        ]);
        assert_eq!(unsafe_row_bytes(&batch(vec![("st", Arc::new(fields))])), 16 + (8 + 16 + 16));
    }
}
