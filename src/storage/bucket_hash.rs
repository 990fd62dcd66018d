//! Spark's bucket hash: `Murmur3Hash` (Murmur3_x86_32, seed 42) followed by `pmod(hash, n)`.
//!
//! Spark assigns a row to bucket `pmod(hash(c1, .., cn), numBuckets)`, where `hash` is its SQL
//! `hash(...)` function: every column is hashed with the previous column's result as seed, a NULL
//! leaves the seed unchanged, and the first seed is 42. `HashPartitioning` uses the same
//! expression, which is why Spark can join bucketed tables without a shuffle. Bucket files we
//! write and shuffles we plan must reproduce this bit for bit, including Spark's legacy
//! byte-at-a-time tail handling for strings and binaries, or Spark would read our buckets as
//! holding the wrong keys.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, GenericByteArray, GenericByteViewArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    ByteArrayType, ByteViewType, DataType, Date32Type, Decimal128Type, Decimal256Type, DurationMicrosecondType,
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, IntervalMonthDayNanoType, IntervalUnit,
    IntervalYearMonthType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::{exec_err, not_impl_err};
use datafusion::error::Result;

/// Seed Spark's `hash(...)` starts every row with.
pub const SPARK_HASH_SEED: i32 = 42;

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn mix_k1(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

#[inline(always)]
fn mix_h1(h: u32, k: u32) -> u32 {
    (h ^ k).rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

#[inline(always)]
fn fmix(h: u32, len: u32) -> u32 {
    let mut h = h ^ len;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// `Murmur3_x86_32.hashInt`: booleans (1/0), bytes, shorts, ints, dates (days) and floats (bits).
#[inline]
pub fn hash_int(i: i32, seed: i32) -> i32 {
    fmix(mix_h1(seed as u32, mix_k1(i as u32)), 4) as i32
}

/// `Murmur3_x86_32.hashLong`: longs, timestamps (microseconds), doubles (bits), decimals with
/// precision <= 18 (unscaled value).
#[inline]
pub fn hash_long(l: i64, seed: i32) -> i32 {
    let h = mix_h1(seed as u32, mix_k1(l as u32));
    let h = mix_h1(h, mix_k1((l as u64 >> 32) as u32));
    fmix(h, 8) as i32
}

/// `Murmur3_x86_32.hashUnsafeBytes`: little-endian 4-byte words, then, unlike standard Murmur3,
/// each trailing byte sign-extended and mixed as a full word of its own.
#[inline]
pub fn hash_bytes(b: &[u8], seed: i32) -> i32 {
    let words = b.chunks_exact(4);
    let tail = words.remainder();
    let h = words.fold(seed as u32, |h, w| mix_h1(h, mix_k1(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))));
    let h = tail.iter().fold(h, |h, &byte| mix_h1(h, mix_k1(byte as i8 as u32)));
    fmix(h, b.len() as u32) as i32
}

/// Spark's `pmod`: the non-negative remainder, so negative hashes still land in `0..n`.
/// Panics if `n` is 0.
#[inline]
pub fn pmod(hash: i32, n: u32) -> u32 {
    (hash as i64).rem_euclid(n as i64) as u32
}

/// `Float.floatToIntBits` after Spark's normalisation: `-0.0` hashes as `0.0`, NaNs are canonical.
#[inline]
fn float_bits(f: f32) -> i32 {
    if f == 0.0 {
        0
    } else if f.is_nan() {
        0x7fc0_0000
    } else {
        f.to_bits() as i32
    }
}

/// `Double.doubleToLongBits` after Spark's normalisation, as [`float_bits`].
#[inline]
fn double_bits(d: f64) -> i64 {
    if d == 0.0 {
        0
    } else if d.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        d.to_bits() as i64
    }
}

/// Decimals wider than a long hash the bytes of `BigInteger.toByteArray()` of the unscaled value:
/// big-endian, minimal two's complement (always at least one byte).
#[inline]
fn hash_big_decimal(unscaled: i128, seed: i32) -> i32 {
    let magnitude = if unscaled < 0 { !unscaled } else { unscaled };
    let len = (128 - magnitude.leading_zeros() as usize) / 8 + 1;
    hash_bytes(&unscaled.to_be_bytes()[16 - len..], seed)
}

/// Whether [`hash_columns`] can hash a column of this type: every type a query can produce
/// but unions and run-end or view-encoded lists, which no Spark type maps to.
pub fn is_hashable(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, value) => is_hashable(value),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => {
            is_hashable(f.data_type())
        }
        DataType::Struct(fields) => fields.iter().all(|f| is_hashable(f.data_type())),
        DataType::Union(..) | DataType::RunEndEncoded(..) | DataType::ListView(_) | DataType::LargeListView(_) => false,
        _ => true,
    }
}

/// Spark's `hash(c1, .., cn)` for every row: starts at [`SPARK_HASH_SEED`] and chains the columns
/// in order. Every column must have `num_rows` rows.
pub fn hash_columns(columns: &[ArrayRef], num_rows: usize) -> Result<Vec<i32>> {
    let mut hashes = vec![SPARK_HASH_SEED; num_rows];
    for column in columns {
        if column.len() != num_rows {
            return exec_err!("Spark hash: column has {} rows, expected {num_rows}", column.len());
        }
        hash_column(&mut hashes, column.as_ref())?;
    }
    Ok(hashes)
}

/// Spark's bucket id, `pmod(hash(c1, .., cn), num_buckets)`, for every row.
pub fn bucket_ids(columns: &[ArrayRef], num_rows: usize, num_buckets: u32) -> Result<Vec<u32>> {
    if num_buckets == 0 {
        return exec_err!("Spark bucket id: the number of buckets must be positive");
    }
    let hashes = hash_columns(columns, num_rows)?;
    let modulus = Modulus::new(num_buckets);
    Ok(vectorized(|| hashes.into_iter().map(|h| modulus.pmod(h)).collect()))
}

/// [`pmod`] by one divisor, by two multiplications (Lemire's "fastmod") instead of a division,
/// which took a share of every shuffle's time: the hash moved up by 2³¹ into `0..2³²`, its
/// remainder taken, and the remainder of 2³¹ taken back off.
struct Modulus {
    n: u32,
    /// `⌈2⁶⁴ / n⌉`, which wraps to 0 for `n` = 1, where every remainder is 0.
    inverse: u64,
    /// 2³¹ mod `n`.
    offset: u32,
}

impl Modulus {
    fn new(n: u32) -> Self {
        Modulus { n, inverse: (u64::MAX / u64::from(n)).wrapping_add(1), offset: ((1u64 << 31) % u64::from(n)) as u32 }
    }

    #[inline]
    fn pmod(&self, hash: i32) -> u32 {
        let shifted = (hash as u32) ^ (1 << 31);
        let fraction = self.inverse.wrapping_mul(u64::from(shifted));
        // The high half of `fraction × n` from two 32 × 32 → 64-bit products, as `n` < 2³².
        let n = u64::from(self.n);
        let remainder = (((fraction >> 32) * n + (((fraction & 0xffff_ffff) * n) >> 32)) >> 32) as u32;
        if remainder >= self.offset { remainder - self.offset } else { remainder + (self.n - self.offset) }
    }
}

/// Folds one column into the running per-row hashes (the seeds).
fn hash_column(hashes: &mut [i32], array: &dyn Array) -> Result<()> {
    let nulls = array.nulls();
    match array.data_type() {
        DataType::Null => {}
        DataType::Boolean => {
            let values = array.as_boolean().values();
            update(hashes, nulls, |i, h| hash_int(values.value(i) as i32, h));
        }
        DataType::Int8 => {
            let values = array.as_primitive::<Int8Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_int(v as i32, h));
        }
        DataType::Int16 => {
            let values = array.as_primitive::<Int16Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_int(v as i32, h));
        }
        DataType::Int32 => {
            let values = array.as_primitive::<Int32Type>().values();
            update_values(hashes, values, nulls, hash_int);
        }
        DataType::Date32 => {
            let values = array.as_primitive::<Date32Type>().values();
            update_values(hashes, values, nulls, hash_int);
        }
        DataType::Int64 => {
            let values = array.as_primitive::<Int64Type>().values();
            update_values(hashes, values, nulls, hash_long);
        }
        DataType::Float32 => {
            let values = array.as_primitive::<Float32Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_int(float_bits(v), h));
        }
        DataType::Float64 => {
            let values = array.as_primitive::<Float64Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_long(double_bits(v), h));
        }
        DataType::Decimal128(precision, _) => {
            let values = array.as_primitive::<Decimal128Type>().values();
            if *precision <= 18 {
                update_values(hashes, values, nulls, |v, h| hash_long(v as i64, h));
            } else {
                update_values(hashes, values, nulls, hash_big_decimal);
            }
        }
        DataType::Timestamp(unit, _) => {
            // Spark timestamps are microseconds; finer units round towards negative infinity.
            match unit {
                TimeUnit::Second => {
                    let values = array.as_primitive::<TimestampSecondType>().values();
                    update_values(hashes, values, nulls, |v, h| hash_long(v.wrapping_mul(1_000_000), h));
                }
                TimeUnit::Millisecond => {
                    let values = array.as_primitive::<TimestampMillisecondType>().values();
                    update_values(hashes, values, nulls, |v, h| hash_long(v.wrapping_mul(1_000), h));
                }
                TimeUnit::Microsecond => {
                    let values = array.as_primitive::<TimestampMicrosecondType>().values();
                    update_values(hashes, values, nulls, hash_long);
                }
                TimeUnit::Nanosecond => {
                    let values = array.as_primitive::<TimestampNanosecondType>().values();
                    update_values(hashes, values, nulls, |v, h| hash_long(v.div_euclid(1_000), h));
                }
            }
        }
        DataType::Utf8 => update_byte_array(hashes, array.as_string::<i32>(), nulls),
        DataType::LargeUtf8 => update_byte_array(hashes, array.as_string::<i64>(), nulls),
        DataType::Binary => update_byte_array(hashes, array.as_binary::<i32>(), nulls),
        DataType::LargeBinary => update_byte_array(hashes, array.as_binary::<i64>(), nulls),
        DataType::Utf8View => update_byte_view(hashes, array.as_string_view(), nulls),
        DataType::BinaryView => update_byte_view(hashes, array.as_binary_view(), nulls),
        // Dictionary encoding is physical only; Spark hashes the decoded values.
        DataType::Dictionary(_, value_type) if is_hashable(value_type) => {
            hash_column(hashes, cast(array, value_type)?.as_ref())?;
        }
        // Types Spark does not have hash as the Spark type that holds their values: unsigned
        // integers as Spark reads them from Parquet (UINT_8/16 → int, UINT_32 → long,
        // UINT_64 → decimal(20, 0)), other decimal widths as `decimal`, half floats as `float`,
        // `Date64` as `date`, times as Spark 4's `time` (nanoseconds of the day), durations
        // as a day-time interval (microseconds), intervals as `CalendarInterval`.
        DataType::UInt8 => {
            let values = array.as_primitive::<UInt8Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_int(v.into(), h));
        }
        DataType::UInt16 => {
            let values = array.as_primitive::<UInt16Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_int(v.into(), h));
        }
        DataType::UInt32 => {
            let values = array.as_primitive::<UInt32Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_long(v.into(), h));
        }
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>().values();
            update_values(hashes, values, nulls, |v, h| hash_big_decimal(v.into(), h));
        }
        DataType::Float16 => hash_column(hashes, cast(array, &DataType::Float32)?.as_ref())?,
        DataType::Decimal32(precision, scale) | DataType::Decimal64(precision, scale) => {
            hash_column(hashes, cast(array, &DataType::Decimal128(*precision, *scale))?.as_ref())?
        }
        DataType::Decimal256(..) => {
            let values = array.as_primitive::<Decimal256Type>().values();
            update_values(hashes, values, nulls, |v, h| {
                let bytes = v.to_be_bytes();
                let sign = if v.is_negative() { 0xff } else { 0x00 };
                // Minimal two's complement, as `BigInteger.toByteArray()`.
                let skip = bytes
                    .iter()
                    .zip(&bytes[1..])
                    .take_while(|(b, next)| **b == sign && (**next & 0x80) == (sign & 0x80))
                    .count();
                hash_bytes(&bytes[skip..], h)
            });
        }
        DataType::Date64 => hash_column(hashes, cast(array, &DataType::Date32)?.as_ref())?,
        DataType::Time32(_) | DataType::Time64(_) => {
            let nanos = cast(array, &DataType::Time64(TimeUnit::Nanosecond))?;
            let values = nanos.as_primitive::<Time64NanosecondType>().values();
            update_values(hashes, values, nulls, hash_long);
        }
        DataType::Duration(_) => {
            let micros = cast(array, &DataType::Duration(TimeUnit::Microsecond))?;
            let values = micros.as_primitive::<DurationMicrosecondType>().values();
            update_values(hashes, values, nulls, hash_long);
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            let values = array.as_primitive::<IntervalYearMonthType>().values();
            update_values(hashes, values, nulls, hash_int);
        }
        DataType::Interval(_) => {
            let intervals = cast(array, &DataType::Interval(IntervalUnit::MonthDayNano))?;
            let values = intervals.as_primitive::<IntervalMonthDayNanoType>().values();
            update_values(hashes, values, nulls, |v, h| {
                hash_int(v.months, hash_int(v.days, hash_long(v.nanoseconds.div_euclid(1_000), h)))
            });
        }
        DataType::FixedSizeBinary(_) => {
            let binary = array.as_fixed_size_binary();
            update(hashes, nulls, |i, h| hash_bytes(binary.value(i), h));
        }
        // Spark hashes an array's elements, a struct's fields and a map's keys and values in
        // order, each seeded with the previous result; NULL elements and fields leave it as is.
        DataType::Struct(_) => {
            let before: Vec<i32> = hashes.to_vec();
            for column in array.as_struct().columns() {
                hash_column(hashes, column.as_ref())?;
            }
            if let Some(nulls) = nulls {
                for i in (0..hashes.len()).filter(|i| nulls.is_null(*i)) {
                    hashes[i] = before[i];
                }
            }
        }
        DataType::List(_) => hash_elements(hashes, nulls, array.as_list::<i32>().iter())?,
        DataType::LargeList(_) => hash_elements(hashes, nulls, array.as_list::<i64>().iter())?,
        DataType::FixedSizeList(..) => hash_elements(hashes, nulls, array.as_fixed_size_list().iter())?,
        DataType::Map(..) => {
            let map = array.as_map();
            let entries: ArrayRef = Arc::new(map.entries().clone());
            let offsets = map.value_offsets();
            let rows = offsets.windows(2).map(|w| Some(entries.slice(w[0] as usize, (w[1] - w[0]) as usize)));
            hash_elements(hashes, nulls, rows)?
        }
        other => return not_impl_err!("Spark hash (Murmur3) of type {other} is not supported"),
    }
    Ok(())
}

/// Chains the hash of each element of every non-null row's collection, in order.
fn hash_elements(
    hashes: &mut [i32],
    nulls: Option<&NullBuffer>,
    rows: impl Iterator<Item = Option<ArrayRef>>,
) -> Result<()> {
    for (i, elements) in rows.enumerate() {
        let Some(elements) = elements.filter(|_| nulls.is_none_or(|n| n.is_valid(i))) else { continue };
        let mut seed = [hashes[i]];
        for j in 0..elements.len() {
            hash_column(&mut seed, elements.slice(j, 1).as_ref())?;
        }
        hashes[i] = seed[0];
    }
    Ok(())
}

/// Applies `f(row, seed)` to every non-null row; null rows keep their seed.
#[inline]
fn update(hashes: &mut [i32], nulls: Option<&NullBuffer>, f: impl Fn(usize, i32) -> i32) {
    match nulls.filter(|n| n.null_count() > 0) {
        None => hashes.iter_mut().enumerate().for_each(|(i, h)| *h = f(i, *h)),
        Some(nulls) => nulls.valid_indices().for_each(|i| hashes[i] = f(i, hashes[i])),
    }
}

/// [`update`] over a primitive value slice, with a tight loop when there are no nulls.
#[inline]
fn update_values<T: Copy>(hashes: &mut [i32], values: &[T], nulls: Option<&NullBuffer>, f: impl Fn(T, i32) -> i32) {
    match nulls.filter(|n| n.null_count() > 0) {
        None => update_every(hashes, values, f),
        Some(nulls) => nulls.valid_indices().for_each(|i| hashes[i] = f(values[i], hashes[i])),
    }
}

/// `f` over every row, in a loop [`vectorized`] compiles for eight rows to an instruction.
#[inline]
fn update_every<T: Copy>(hashes: &mut [i32], values: &[T], f: impl Fn(T, i32) -> i32) {
    vectorized(|| hashes.iter_mut().zip(values).for_each(|(h, &v)| *h = f(v, *h)));
}

/// Runs `work`, compiled for AVX2 where the processor has it. Murmur3's steps and the bucket
/// id's remainder are 32-bit multiplications, rotations and 32 × 32 → 64-bit products, which
/// the baseline x86-64 instruction set (SSE2) has no vector form of all of, so the portable
/// loops go one row at a time; every shuffle and bucketed write runs them for each row.
#[inline]
fn vectorized<R>(work: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor running this has AVX2, checked just above.
        return unsafe { with_avx2(work) };
    }
    work()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn with_avx2<R>(work: impl FnOnce() -> R) -> R {
    work()
}

fn update_byte_array<T: ByteArrayType>(hashes: &mut [i32], array: &GenericByteArray<T>, nulls: Option<&NullBuffer>) {
    update(hashes, nulls, |i, h| hash_bytes(AsRef::<[u8]>::as_ref(array.value(i)), h));
}

fn update_byte_view<T: ByteViewType>(hashes: &mut [i32], array: &GenericByteViewArray<T>, nulls: Option<&NullBuffer>) {
    update(hashes, nulls, |i, h| hash_bytes(AsRef::<[u8]>::as_ref(array.value(i)), h));
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, ListArray, PrimitiveArray, StringArray,
        StructArray, TimestampNanosecondArray, UInt32Array, UInt64Array, UnionArray, new_null_array,
    };
    use datafusion::arrow::datatypes::{ArrowPrimitiveType, Field, Fields, UnionFields};
    use datafusion::error::DataFusionError;

    const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/spark-hash-vectors.tsv");
    const BUCKET_COUNTS: [u32; 4] = [4, 8, 200, 256];

    struct Vector {
        line: usize,
        values: Vec<Option<String>>,
        hash: i32,
        buckets: [u32; 4],
    }

    fn primitive<T: ArrowPrimitiveType>(values: &[Option<&str>], parse: impl Fn(&str) -> T::Native) -> ArrayRef {
        Arc::new(values.iter().map(|v| v.map(&parse)).collect::<PrimitiveArray<T>>())
    }

    /// An Arrow array of the Spark SQL type `ty` holding `values` (None = NULL).
    fn spark_array(ty: &str, values: &[Option<&str>]) -> ArrayRef {
        let strings: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        let from_string = |target: DataType| cast(&strings, &target).unwrap();
        match ty {
            "boolean" => Arc::new(values.iter().map(|v| v.map(|s| s.parse().unwrap())).collect::<BooleanArray>()),
            "tinyint" => primitive::<Int8Type>(values, |s| s.parse().unwrap()),
            "smallint" => primitive::<Int16Type>(values, |s| s.parse().unwrap()),
            "int" => primitive::<Int32Type>(values, |s| s.parse().unwrap()),
            "bigint" => primitive::<Int64Type>(values, |s| s.parse().unwrap()),
            "float" => primitive::<Float32Type>(values, |s| s.parse().unwrap()),
            "double" => primitive::<Float64Type>(values, |s| s.parse().unwrap()),
            "string" => strings,
            "date" => from_string(DataType::Date32),
            "timestamp" => from_string(DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))),
            _ => {
                let (p, s) = ty
                    .strip_prefix("decimal(")
                    .and_then(|t| t.strip_suffix(')'))
                    .and_then(|t| t.split_once(','))
                    .unwrap_or_else(|| panic!("unknown type {ty}"));
                from_string(DataType::Decimal128(p.parse().unwrap(), s.parse().unwrap()))
            }
        }
    }

    /// Other physical encodings of the same Spark values, which must hash identically.
    fn encodings(array: &ArrayRef) -> Vec<ArrayRef> {
        let utc = Some("UTC".into());
        let targets = match array.data_type() {
            DataType::Utf8 => vec![
                DataType::LargeUtf8,
                DataType::Utf8View,
                DataType::Binary,
                DataType::LargeBinary,
                DataType::BinaryView,
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            ],
            DataType::Timestamp(..) => {
                vec![DataType::Timestamp(TimeUnit::Microsecond, None), DataType::Timestamp(TimeUnit::Nanosecond, utc)]
            }
            DataType::Int64 => {
                vec![DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Int64))]
            }
            _ => vec![],
        };
        targets.iter().map(|t| cast(array, t).unwrap()).collect()
    }

    /// `bigint,decimal(10,2)` -> `["bigint", "decimal(10,2)"]`.
    fn split_types(types: &str) -> Vec<&str> {
        let mut depth = 0;
        types
            .split(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .collect()
    }

    /// Vectors from the Spark-generated file, grouped by column types in file order.
    fn load_vectors() -> (Vec<(String, Vec<Vector>)>, usize) {
        let text = std::fs::read_to_string(VECTORS).unwrap();
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.starts_with('#'));
        let (_, header) = lines.next().unwrap();
        assert!(header.starts_with("type\tvalue\thash\tbucket_4"), "{header}");
        let mut groups: Vec<(String, Vec<Vector>)> = Vec::new();
        let mut count = 0;
        for (i, line) in lines.filter(|(_, l)| !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 7, "line {}: {line:?}", i + 1);
            let vector = Vector {
                line: i + 1,
                values: f[1].split('|').map(|v| (v != "NULL").then(|| v.to_string())).collect(),
                hash: f[2].parse().unwrap(),
                buckets: std::array::from_fn(|b| f[3 + b].parse().unwrap()),
            };
            match groups.iter_mut().find(|(t, _)| t == f[0]) {
                Some((_, group)) => group.push(vector),
                None => groups.push((f[0].to_string(), vec![vector])),
            }
            count += 1;
        }
        (groups, count)
    }

    #[test]
    fn matches_every_spark_vector() {
        let (groups, data_rows) = load_vectors();
        let mut checked = 0;
        let mut mismatches = Vec::new();
        for (types, rows) in &groups {
            let types = split_types(types);
            let columns: Vec<ArrayRef> = types
                .iter()
                .enumerate()
                .map(|(c, ty)| {
                    assert!(rows.iter().all(|r| r.values.len() == types.len()));
                    let values: Vec<Option<&str>> = rows.iter().map(|r| r.values[c].as_deref()).collect();
                    spark_array(ty, &values)
                })
                .collect();
            let n = rows.len();
            let hashes = hash_columns(&columns, n).unwrap();
            let buckets: Vec<Vec<u32>> = BUCKET_COUNTS.iter().map(|&b| bucket_ids(&columns, n, b).unwrap()).collect();
            for (r, row) in rows.iter().enumerate() {
                let got = (hashes[r], std::array::from_fn(|b| buckets[b][r]));
                if got != (row.hash, row.buckets) {
                    mismatches.push(format!(
                        "line {} {types:?} {:?}: got {got:?}, Spark {:?}",
                        row.line,
                        row.values,
                        (row.hash, row.buckets)
                    ));
                }
                checked += 1;
            }
            for (c, column) in columns.iter().enumerate() {
                for encoded in encodings(column) {
                    let mut alt = columns.clone();
                    alt[c] = encoded;
                    assert_eq!(hash_columns(&alt, n).unwrap(), hashes, "{types:?} as {}", alt[c].data_type());
                }
            }
            let sliced: Vec<ArrayRef> = columns.iter().map(|c| c.slice(1, n - 1)).collect();
            assert_eq!(hash_columns(&sliced, n - 1).unwrap(), hashes[1..], "{types:?} sliced");
        }
        assert!(mismatches.is_empty(), "{} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
        assert_eq!(checked, data_rows);
        assert!(checked > 200, "only {checked} vectors");
    }

    #[test]
    fn spec_vectors() {
        let s = SPARK_HASH_SEED;
        // hash('Spark', array(123), 2): arrays fold their elements.
        assert_eq!(hash_int(2, hash_int(123, hash_bytes(b"Spark", s))), -1321691492);
        let cases = [
            (hash_int(1, s), -559580957, 3),
            (hash_int(0, s), 933211791, 7),
            (hash_int(-1, s), -1604776387, 5),
            (hash_int(2, s), 1765031574, 6),
            (hash_int(3, s), -1823081949, 3),
            (hash_int(4, s), -397064898, 6),
            (hash_long(1, s), -1712319331, 5),
            (hash_long(0, s), -1670924195, 5),
            (hash_long(-1, s), -939490007, 1),
            (s, 42, 2),
            (hash_bytes(b"", s), 142593372, 4),
            (hash_bytes(b"a", s), 1485273170, 2),
            (hash_bytes(b"abc", s), 1322437556, 4),
            (hash_bytes(b"hello world", s), -1528836094, 2),
            (hash_long(double_bits(1.0), s), -460888942, 2),
            (hash_long(double_bits(0.0), s), -1670924195, 5),
            (hash_long(double_bits(-0.0), s), -1670924195, 5),
            (hash_long(double_bits(123.456), s), -39269148, 4),
            (hash_bytes(b"a", hash_int(1, s)), -936062819, 5),
        ];
        for (i, (hash, expected, bucket)) in cases.into_iter().enumerate() {
            assert_eq!((hash, pmod(hash, 8)), (expected, bucket), "case {i}");
        }
    }

    #[test]
    fn spec_vectors_through_arrays() {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(1), Some(0), None, Some(1)])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), None, None])),
            Arc::new(StringArray::from(vec![None, None, None, Some("a")])),
        ];
        // Each column's result seeds the next; NULLs leave the running hash unchanged.
        let expected = vec![hash_int(1, -559580957), hash_int(0, 933211791), 42, -936062819];
        assert_eq!(hash_columns(&columns, 4).unwrap(), expected);
        assert_eq!(hash_columns(&[], 3).unwrap(), vec![42; 3]);
    }

    #[test]
    fn floats_normalise_zero_and_nan() {
        let f: ArrayRef = Arc::new(Float32Array::from(vec![0.0, -0.0, f32::NAN, f32::from_bits(0xffc0_0001)]));
        assert_eq!(hash_columns(&[f], 4).unwrap(), vec![933211791, 933211791, -349261430, -349261430]);
        let d: ArrayRef = Arc::new(Float64Array::from(vec![-0.0, f64::NAN, -f64::NAN]));
        assert_eq!(hash_columns(&[d], 3).unwrap(), vec![-1670924195, -1281358385, -1281358385]);
    }

    #[test]
    fn wide_decimals_hash_minimal_twos_complement() {
        for (v, bytes) in [
            (0i128, &[0x00][..]),
            (127, &[0x7f]),
            (128, &[0x00, 0x80]),
            (-1, &[0xff]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
            (i128::MAX, &i128::MAX.to_be_bytes()),
            (i128::MIN, &i128::MIN.to_be_bytes()),
        ] {
            assert_eq!(hash_big_decimal(v, 42), hash_bytes(bytes, 42), "{v}");
        }
    }

    #[test]
    fn timestamps_convert_to_microseconds_flooring() {
        let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![-1, 1_999, 0]));
        assert_eq!(hash_columns(&[ns], 3).unwrap(), vec![hash_long(-1, 42), hash_long(1, 42), hash_long(0, 42)]);
        let s = cast(&(Arc::new(Int64Array::from(vec![3])) as ArrayRef), &DataType::Timestamp(TimeUnit::Second, None))
            .unwrap();
        let ms = cast(&s, &DataType::Timestamp(TimeUnit::Millisecond, None)).unwrap();
        assert_eq!(hash_columns(&[s], 1).unwrap(), vec![hash_long(3_000_000, 42)]);
        assert_eq!(hash_columns(&[ms], 1).unwrap(), vec![hash_long(3_000_000, 42)]);
    }

    #[test]
    fn every_type_a_query_makes_hashes_with_nulls_as_seed() {
        let types = [
            DataType::Null,
            DataType::Boolean,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::UInt8,
            DataType::UInt16,
            DataType::UInt32,
            DataType::UInt64,
            DataType::Float16,
            DataType::Float32,
            DataType::Float64,
            DataType::Decimal32(5, 2),
            DataType::Decimal64(10, 2),
            DataType::Decimal128(10, 2),
            DataType::Decimal128(38, 10),
            DataType::Decimal256(40, 0),
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Binary,
            DataType::LargeBinary,
            DataType::BinaryView,
            DataType::FixedSizeBinary(4),
            DataType::Date32,
            DataType::Date64,
            DataType::Time64(TimeUnit::Microsecond),
            DataType::Duration(TimeUnit::Millisecond),
            DataType::Interval(IntervalUnit::MonthDayNano),
            DataType::Timestamp(TimeUnit::Second, None),
            DataType::Timestamp(TimeUnit::Millisecond, None),
            DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            DataType::Struct(Fields::from(vec![Field::new("a", DataType::Int32, true)])),
            DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))),
        ];
        for dt in &types {
            assert!(is_hashable(dt), "{dt}");
            assert_eq!(hash_columns(&[new_null_array(dt, 3)], 3).unwrap(), vec![42; 3], "{dt}");
        }
    }

    #[test]
    fn other_types_hash_as_the_spark_type_that_holds_their_values() {
        let unsigned: ArrayRef = Arc::new(UInt64Array::from(vec![7, u64::MAX]));
        let as_decimal = cast(&unsigned, &DataType::Decimal128(20, 0)).unwrap();
        assert_eq!(hash_columns(&[unsigned], 2).unwrap(), hash_columns(&[as_decimal], 2).unwrap());
        let small: ArrayRef = Arc::new(UInt32Array::from(vec![7, u32::MAX]));
        let as_long = cast(&small, &DataType::Int64).unwrap();
        assert_eq!(hash_columns(&[small], 2).unwrap(), hash_columns(&[as_long], 2).unwrap());
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![-129, 0, i64::MAX]));
        let wide = cast(&longs, &DataType::Decimal256(40, 0)).unwrap();
        let narrow = cast(&wide, &DataType::Decimal128(38, 0)).unwrap();
        assert_eq!(hash_columns(&[wide], 3).unwrap(), hash_columns(&[narrow], 3).unwrap());
        // An array hashes its elements in order: [1, 2] as hash(2, hash(1, seed)).
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(1), None]),
            None,
        ]));
        assert_eq!(hash_columns(&[list], 3).unwrap(), vec![hash_int(2, hash_int(1, 42)), hash_int(1, 42), 42]);
        // A struct hashes its fields in order; a NULL struct leaves the seed.
        let fields: Vec<ArrayRef> =
            vec![Arc::new(Int32Array::from(vec![1, 3])), Arc::new(Int64Array::from(vec![2, 4]))];
        let structs: ArrayRef = Arc::new(StructArray::new(
            Fields::from(vec![Field::new("a", DataType::Int32, true), Field::new("b", DataType::Int64, true)]),
            fields,
            Some(NullBuffer::from(vec![true, false])),
        ));
        assert_eq!(hash_columns(&[structs], 2).unwrap(), vec![hash_long(2, hash_int(1, 42)), 42]);
    }

    #[test]
    fn unions_are_rejected() {
        let fields = UnionFields::try_new(vec![0], vec![Field::new("a", DataType::Int32, true)]).unwrap();
        let children: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![1]))];
        let union: ArrayRef = Arc::new(UnionArray::try_new(fields, vec![0i8].into(), None, children).unwrap());
        assert!(!is_hashable(union.data_type()));
        let err = hash_columns(&[union], 1).unwrap_err();
        assert!(matches!(&err, DataFusionError::NotImplemented(m) if m.contains("Union")), "{err}");
    }

    #[test]
    fn the_modulus_by_multiplication_is_pmod() {
        let divisors = [1, 2, 3, 4, 7, 8, 200, 256, 1000, 65_537, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, u32::MAX];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let edges = [0, 1, -1, i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1];
        let randoms = (0..20_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as i32
        });
        let hashes: Vec<i32> = edges.into_iter().chain(randoms).collect();
        for n in divisors {
            let modulus = Modulus::new(n);
            for &hash in &hashes {
                assert_eq!(modulus.pmod(hash), pmod(hash, n), "pmod({hash}, {n})");
            }
            let vectorized: Vec<u32> = vectorized(|| hashes.iter().map(|h| modulus.pmod(*h)).collect());
            assert!(vectorized.iter().zip(&hashes).all(|(id, hash)| *id == pmod(*hash, n)), "vectorized pmod by {n}");
        }
    }

    /// The loops compiled for AVX2 hash every row as the row-at-a-time functions do.
    #[test]
    fn vectorized_hashes_are_the_row_at_a_time_ones() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let longs: Vec<i64> = (0..10_007)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as i64
            })
            .chain([0, -1, i64::MIN, i64::MAX])
            .collect();
        let ints: Vec<i32> = longs.iter().map(|l| (*l >> 17) as i32).collect();
        let columns: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(longs.clone())), Arc::new(Int32Array::from(ints.clone()))];
        let hashes = hash_columns(&columns, longs.len()).unwrap();
        for ((hash, long), int) in hashes.iter().zip(&longs).zip(&ints) {
            assert_eq!(*hash, hash_int(*int, hash_long(*long, SPARK_HASH_SEED)), "hash of ({long}, {int})");
        }
    }

    #[test]
    fn pmod_and_argument_errors() {
        assert_eq!(pmod(-1, 8), 7);
        assert_eq!(pmod(i32::MIN, 256), 0);
        assert_eq!(pmod(i32::MAX, 200), 47);
        assert_eq!(pmod(-1, u32::MAX), u32::MAX - 1);
        let one: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        assert!(hash_columns(std::slice::from_ref(&one), 2).is_err());
        assert!(bucket_ids(&[one], 1, 0).is_err());
    }
}
