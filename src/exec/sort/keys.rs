//! Sort keys as unsigned integers that order as the rows do: what lets a partition be checked
//! for order in one pass and sorted by radix.
//!
//! Spark's sorter keeps an 8-byte prefix per row for the same reasons (`SortPrefixUtils`);
//! here every key of a fixed-width type is mapped whole, and the keys of a row are then packed
//! into one integer by the bits their values span in the partition.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, new_empty_array};
use arrow::buffer::NullBuffer;
use arrow::compute::SortOptions;
use arrow::datatypes::DataType;

/// One key of one batch: each value as a `u64` whose unsigned order is the key's order under
/// its sort options, and the key's nulls.
pub(crate) struct NormalizedKey {
    values: Vec<u64>,
    nulls: Option<NullBuffer>,
}

/// The normalized form of `array` sorted with `options`, if its type has a fixed width of at
/// most 64 bits.
pub(crate) fn normalize(array: &ArrayRef, options: SortOptions) -> Option<NormalizedKey> {
    const SIGN: u64 = 1 << 63;
    let data = array.to_data();
    let mut values: Vec<u64> = match array.data_type() {
        DataType::Int8 => data.buffer::<i8>(0).iter().map(|v| (*v as i64 as u64) ^ SIGN).collect(),
        DataType::Int16 => data.buffer::<i16>(0).iter().map(|v| (*v as i64 as u64) ^ SIGN).collect(),
        DataType::Int32 | DataType::Date32 | DataType::Time32(_) => {
            data.buffer::<i32>(0).iter().map(|v| (*v as i64 as u64) ^ SIGN).collect()
        }
        DataType::Int64 | DataType::Date64 | DataType::Time64(_) | DataType::Timestamp(..) | DataType::Duration(_) => {
            data.buffer::<i64>(0).iter().map(|v| (*v as u64) ^ SIGN).collect()
        }
        DataType::UInt8 => data.buffer::<u8>(0).iter().map(|v| *v as u64).collect(),
        DataType::UInt16 => data.buffer::<u16>(0).iter().map(|v| *v as u64).collect(),
        DataType::UInt32 => data.buffer::<u32>(0).iter().map(|v| *v as u64).collect(),
        DataType::UInt64 => data.buffer::<u64>(0).to_vec(),
        // IEEE 754 total order, as DataFusion compares floats: flip every bit of a negative
        // value, only the sign bit of a positive one.
        DataType::Float32 => data.buffer::<u32>(0).iter().map(|v| total_order(u64::from(*v) << 32)).collect(),
        DataType::Float64 => data.buffer::<u64>(0).iter().map(|v| total_order(*v)).collect(),
        _ => return None,
    };
    if options.descending {
        values.iter_mut().for_each(|v| *v = !*v);
    }
    Some(NormalizedKey { values, nulls: array.logical_nulls().filter(|n| n.null_count() > 0) })
}

/// Whether keys of `data_type` can be normalized.
pub(crate) fn normalizable(data_type: &DataType) -> bool {
    normalize(&new_empty_array(data_type), SortOptions::default()).is_some()
}

fn total_order(bits: u64) -> u64 {
    if bits >> 63 == 1 { !bits } else { bits | (1 << 63) }
}

impl NormalizedKey {
    pub(crate) fn values(&self) -> &[u64] {
        &self.values
    }

    pub(crate) fn has_nulls(&self) -> bool {
        self.nulls.is_some()
    }

    pub(crate) fn is_null(&self, row: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n.is_null(row))
    }

    /// Where `row` sorts under `options`: nulls before or after every value, values by their
    /// normalized form.
    fn rank(&self, row: usize, options: SortOptions) -> (u8, u64) {
        match (self.is_null(row), options.nulls_first) {
            (true, true) => (0, 0),
            (true, false) => (2, 0),
            (false, _) => (1, self.values[row]),
        }
    }
}

/// The normalized keys of one batch, in the ordering's order.
pub(super) struct BatchKeys {
    keys: Vec<NormalizedKey>,
    rows: usize,
}

impl BatchKeys {
    pub(super) fn new(keys: Vec<NormalizedKey>, rows: usize) -> Self {
        BatchKeys { keys, rows }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub(super) fn memory_size(&self) -> usize {
        self.keys.len() * self.rows * size_of::<u64>()
    }

    fn compare(&self, row: usize, other: &BatchKeys, other_row: usize, options: &[SortOptions]) -> Ordering {
        self.keys
            .iter()
            .zip(&other.keys)
            .zip(options)
            .map(|((a, b), o)| a.rank(row, *o).cmp(&b.rank(other_row, *o)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }

    /// Whether this batch's rows are in order and follow `previous`'s last row.
    pub(super) fn in_order_after(&self, previous: Option<&BatchKeys>, options: &[SortOptions]) -> bool {
        if self.rows == 0 {
            return true;
        }
        if let Some(previous) = previous.filter(|p| p.rows > 0)
            && previous.compare(previous.rows - 1, self, 0, options).is_gt()
        {
            return false;
        }
        match self.keys.as_slice() {
            [key] if key.nulls.is_none() => key.values.windows(2).all(|w| w[0] <= w[1]),
            _ => (1..self.rows).all(|row| self.compare(row - 1, self, row, options).is_le()),
        }
    }
}

/// What one key's values span in a partition.
#[derive(Clone, Copy)]
pub(super) struct Span {
    min: u64,
    max: u64,
    nulls: bool,
}

impl Default for Span {
    fn default() -> Self {
        Span { min: u64::MAX, max: 0, nulls: false }
    }
}

impl Span {
    /// What each of the `keys` keys spans over `batches`.
    pub(super) fn of(batches: &[BatchKeys], keys: usize) -> Vec<Span> {
        let mut spans = vec![Span::default(); keys];
        for batch in batches {
            for (span, key) in spans.iter_mut().zip(&batch.keys) {
                span.nulls |= key.nulls.is_some();
                let values = key.values.iter().enumerate().filter(|(row, _)| !key.is_null(*row)).map(|(_, v)| *v);
                let (min, max) = values.fold((span.min, span.max), |(min, max), v| (min.min(v), max.max(v)));
                (span.min, span.max) = (min, max);
            }
        }
        spans
    }
}

/// How the keys of a partition pack into one integer: each key as its offset from the
/// partition's least value (with a place for null before or after the values), in as many
/// bits as its values span, the first key highest.
pub(super) struct Packing {
    keys: Vec<KeyPacking>,
    /// Bits the packed keys take.
    pub(super) bits: u32,
}

struct KeyPacking {
    min: u64,
    /// The offset nulls take: below every value (0) or above them.
    null_offset: u64,
    /// Added to a value's offset to leave 0 for nulls placed first.
    value_shift: u64,
    bits: u32,
}

impl Packing {
    /// The packing of keys spanning `spans`, if all of them fit in 64 bits.
    pub(super) fn new(spans: &[Span], options: &[SortOptions]) -> Option<Packing> {
        let keys: Vec<KeyPacking> = spans
            .iter()
            .zip(options)
            .map(|(span, options)| {
                // No value at all (every key null) spans nothing.
                let (min, width) =
                    if span.min > span.max { (0, 0) } else { (span.min, u128::from(span.max - span.min)) };
                // Offsets run 0..=width, one more for null.
                let top = width + u128::from(span.nulls);
                let bits = 128 - top.leading_zeros();
                let (null_offset, value_shift) = match (span.nulls, options.nulls_first) {
                    (true, true) => (0, 1),
                    (true, false) => (top as u64, 0),
                    (false, _) => (0, 0),
                };
                KeyPacking { min, null_offset, value_shift, bits }
            })
            .collect();
        let bits = keys.iter().map(|k| k.bits).sum();
        (bits <= 64).then_some(Packing { keys, bits })
    }

    /// The packed keys of every row of `batch`.
    pub(super) fn pack(&self, batch: &BatchKeys) -> Vec<u64> {
        let mut packed = vec![0u64; batch.rows];
        for (packing, key) in self.keys.iter().zip(&batch.keys) {
            if packing.bits == 0 {
                continue;
            }
            for (row, (out, value)) in packed.iter_mut().zip(&key.values).enumerate() {
                let offset =
                    if key.is_null(row) { packing.null_offset } else { value - packing.min + packing.value_shift };
                *out = out.checked_shl(packing.bits).unwrap_or(0) | offset;
            }
        }
        packed
    }
}
