//! `repeat`, `lpad` and `rpad` build strings as long as their arguments say:
//! `repeat('x', 1000000000)` is a gigabyte from a 30-byte statement, built in one call that
//! neither a timeout nor a cancel can interrupt. PostgreSQL refuses a value over 1 GB
//! (`54000` requested length too large); under `--memory-limit` a smaller one must also fit
//! in what the pool has left, twice over while its builder grows. These wrappers size the
//! result from the arguments before it is built, refuse it as PostgreSQL does, and hold its
//! bytes in the pool while it is built (`53200` when they do not fit).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};

use crate::error::SqlError;

/// PostgreSQL's largest value (`MaxAllocSize`).
const MAX_VALUE_BYTES: u64 = (1 << 30) - 1;

/// How a function's result grows with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(s, n)`: `n` copies of `s`.
    Repeat,
    /// `lpad(s, n [, fill])`, `rpad(…)`: `n` characters.
    Pad,
}

/// A result sized, bounded and reserved before the wrapped function builds it.
#[derive(Debug)]
struct BoundedString {
    growth: Growth,
    pool: Arc<dyn MemoryPool>,
}

// The pool is the session's, the same for every call: it does not tell functions apart.
impl PartialEq for BoundedString {
    fn eq(&self, other: &Self) -> bool {
        self.growth == other.growth
    }
}

impl Eq for BoundedString {}

impl Hash for BoundedString {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.growth.hash(state);
    }
}

/// The session's `repeat`, `lpad` and `rpad`, bounded; those not registered are skipped.
pub fn bounded(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>, pool: &Arc<dyn MemoryPool>) -> Vec<ScalarUDF> {
    [("repeat", Growth::Repeat), ("lpad", Growth::Pad), ("rpad", Growth::Pad)]
        .into_iter()
        .filter_map(|(name, growth)| overridden(lookup(name), BoundedString { growth, pool: Arc::clone(pool) }))
        .collect()
}

/// Byte lengths of a string argument, or `None` where it is NULL.
fn byte_lengths(array: &ArrayRef) -> Result<Vec<Option<u64>>> {
    let text = cast(array, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    Ok(text.iter().map(|s| s.map(|s| s.len() as u64)).collect())
}

/// Bytes one character of a fill string can take.
fn char_width(array: &ArrayRef) -> Result<Vec<u64>> {
    let text = cast(array, &DataType::Utf8)?;
    Ok(text.as_string::<i32>().iter().map(|s| if s.is_none_or(str::is_ascii) { 1 } else { 4 }).collect())
}

impl BoundedString {
    /// The largest value the call builds and the bytes of all of them, at most.
    fn result_bytes(&self, args: &[ColumnarValue], rows: usize) -> Result<(u64, u64)> {
        let arrays: Vec<ArrayRef> = args.iter().map(|a| a.to_array(rows)).collect::<Result<_>>()?;
        let (Some(text), Some(count)) = (arrays.first(), arrays.get(1)) else {
            return Ok((0, 0));
        };
        let counts = cast(count, &DataType::Int64)?;
        let counts = counts.as_primitive::<Int64Type>();
        let lengths = byte_lengths(text)?;
        let widths = match (self.growth, arrays.get(2)) {
            (Growth::Pad, Some(fill)) => char_width(fill)?,
            _ => vec![1; counts.len()],
        };
        let (mut largest, mut total) = (0u64, 0u64);
        for row in 0..counts.len() {
            let (Some(length), false) = (lengths[row], counts.is_null(row)) else { continue };
            let count = counts.value(row).max(0) as u64;
            let bytes = match self.growth {
                Growth::Repeat => length.saturating_mul(count),
                Growth::Pad => length.saturating_add(count.saturating_mul(widths[row])),
            };
            largest = largest.max(bytes);
            total = total.saturating_add(bytes);
        }
        Ok((largest, total))
    }
}

impl Invoke for BoundedString {
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = inner.name();
        let (largest, total) = self.result_bytes(&args.args, args.number_rows)?;
        if largest > MAX_VALUE_BYTES {
            return Err(DataFusionError::from(SqlError::new(
                "54000",
                format!("requested length too large: {name}() would build a value of {largest} bytes"),
            )));
        }
        let reservation = MemoryConsumer::new(format!("{name}()")).register(&self.pool);
        // A string builder may hold twice its final size while it grows.
        reservation.try_grow(total.saturating_mul(2) as usize).map_err(|_| {
            DataFusionError::from(SqlError::new(
                "53200",
                format!("out of memory: {name}() would build {total} bytes, more than --memory-limit leaves free"),
            ))
        })?;
        inner.invoke_with_args(args)
    }
}
