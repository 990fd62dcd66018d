//! Routing a map task's rows when every column has a fixed width (integers, floats, dates,
//! timestamps, decimals, intervals): each input batch's rows are grouped by partition (a
//! counting sort of their ids), then each column appends, partition by partition, its values
//! of those rows to the partition's buffer; a partition's buffers become a batch once they hold
//! `batch_size` rows.
//!
//! Each value is copied once, read from a batch that is in cache and written in one run per
//! partition. (Reordering a few batches and then gathering each partition's runs, as `gather`
//! does for other types, copies every value twice, the second time from rows that have left
//! the cache once partitions × `batch_size` rows wait; writing row by row to the partition of
//! each touches a page per partition, too many at Spark's 200.) Values move as plain words of
//! their width, whatever their type. A buffer takes room for `batch_size` values when its
//! partition first gets a row, and memory is counted by the values written, the pages in use.

use std::mem;
use std::sync::Arc;

use datafusion::arrow::array::builder::NullBufferBuilder;
use datafusion::arrow::array::{ArrayData, ArrayRef, RecordBatch, RecordBatchOptions, make_array};
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::datatypes::{ArrowNativeType, DataType, SchemaRef, i256};
use datafusion::error::Result;

use super::map_output::{Batcher, Routed};

/// One input batch's rows by partition: partition `p`'s are `rows[starts[p]..starts[p + 1]]`,
/// in their order in the batch.
struct Grouped {
    rows: Vec<u32>,
    starts: Vec<u32>,
}

impl Grouped {
    fn new(partitions: usize) -> Self {
        Grouped { rows: Vec::new(), starts: vec![0; partitions + 1] }
    }

    /// Groups rows `0..ids.len()` by `ids` (a counting sort).
    fn group(&mut self, ids: &[u32]) {
        self.starts.fill(0);
        for id in ids {
            self.starts[*id as usize + 1] += 1;
        }
        for partition in 1..self.starts.len() {
            self.starts[partition] += self.starts[partition - 1];
        }
        self.rows.resize(ids.len(), 0);
        let mut next = self.starts.clone();
        for (row, id) in ids.iter().enumerate() {
            let slot = &mut next[*id as usize];
            self.rows[*slot as usize] = row as u32;
            *slot += 1;
        }
    }

    fn len(&self, partition: usize) -> usize {
        (self.starts[partition + 1] - self.starts[partition]) as usize
    }

    /// Each partition's rows, partition by partition.
    fn partitions(&self) -> impl Iterator<Item = &[u32]> {
        self.starts.windows(2).map(|range| &self.rows[range[0] as usize..range[1] as usize])
    }
}

/// One column's values waiting in each partition.
trait ColumnBuffers: Send {
    /// Appends each partition's rows of `array`.
    fn append(&mut self, array: &ArrayData, grouped: &Grouped);
    /// Partition `partition`'s values as an array, leaving its buffer empty.
    fn take(&mut self, partition: usize) -> Result<ArrayRef>;
}

/// A value moved as its bytes.
trait Word: ArrowNativeType {
    fn from_bytes(bytes: &[u8]) -> Self;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            fn from_bytes(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("a value's width"))
            }
        }
    )*};
}
word!(u8, u16, u32, u64, i128, i256);

struct FixedWidth<T> {
    data_type: DataType,
    batch_size: usize,
    values: Vec<Vec<T>>,
    nulls: Vec<NullBufferBuilder>,
}

impl<T: Word> FixedWidth<T> {
    fn boxed(data_type: DataType, partitions: usize, batch_size: usize) -> Box<dyn ColumnBuffers> {
        Box::new(FixedWidth::<T> {
            data_type,
            batch_size,
            values: (0..partitions).map(|_| Vec::new()).collect(),
            nulls: (0..partitions).map(|_| NullBufferBuilder::new(batch_size)).collect(),
        })
    }
}

impl<T: Word> ColumnBuffers for FixedWidth<T> {
    /// Partition by partition, so that each writes its values in one go, reading them from a
    /// batch that is in cache (rather than row by row, writing to every partition in turn).
    fn append(&mut self, array: &ArrayData, grouped: &Grouped) {
        let width = mem::size_of::<T>();
        let bytes = &array.buffers()[0].as_slice()[array.offset() * width..][..array.len() * width];
        let value = |row: &u32| T::from_bytes(&bytes[*row as usize * width..][..width]);
        let nulls = array.nulls().filter(|nulls| nulls.null_count() > 0);
        for ((values, validity), rows) in self.values.iter_mut().zip(&mut self.nulls).zip(grouped.partitions()) {
            if rows.is_empty() {
                continue;
            }
            if values.capacity() == 0 {
                values.reserve_exact(rows.len().max(self.batch_size));
            }
            values.extend(rows.iter().map(value));
            match nulls {
                Some(nulls) => rows.iter().for_each(|row| validity.append(nulls.is_valid(*row as usize))),
                None => validity.append_n_non_nulls(rows.len()),
            }
        }
    }

    fn take(&mut self, partition: usize) -> Result<ArrayRef> {
        let mut values = mem::take(&mut self.values[partition]);
        // The last batches of a task may fill little of the room they took.
        if values.len() < values.capacity() / 2 {
            values.shrink_to_fit();
        }
        let data = ArrayData::builder(self.data_type.clone())
            .len(values.len())
            .add_buffer(Buffer::from_vec(values))
            .nulls(self.nulls[partition].finish())
            .build()?;
        Ok(make_array(data))
    }
}

pub(super) struct Scatter {
    schema: SchemaRef,
    batch_size: usize,
    columns: Vec<Box<dyn ColumnBuffers>>,
    /// Rows waiting per partition.
    rows: Vec<usize>,
    /// The input batch being routed, by partition.
    grouped: Grouped,
    row_width: usize,
    buffered_rows: usize,
}

impl Scatter {
    /// `None` when a column's type has no fixed width.
    pub(super) fn try_new(schema: SchemaRef, partitions: usize, batch_size: usize) -> Option<Self> {
        let mut row_width = 0;
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let data_type = field.data_type().clone();
                let width = data_type.primitive_width()?;
                row_width += width;
                let new = match width {
                    1 => FixedWidth::<u8>::boxed,
                    2 => FixedWidth::<u16>::boxed,
                    4 => FixedWidth::<u32>::boxed,
                    8 => FixedWidth::<u64>::boxed,
                    16 => FixedWidth::<i128>::boxed,
                    32 => FixedWidth::<i256>::boxed,
                    _ => return None,
                };
                Some(new(data_type, partitions, batch_size))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Scatter {
            schema,
            batch_size,
            columns,
            rows: vec![0; partitions],
            grouped: Grouped::new(partitions),
            row_width,
            buffered_rows: 0,
        })
    }

    fn take(&mut self, partition: usize, done: &mut Vec<Routed>) -> Result<()> {
        let rows = mem::take(&mut self.rows[partition]);
        self.buffered_rows -= rows;
        let arrays = self.columns.iter_mut().map(|column| column.take(partition)).collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        done.push((partition, RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)?));
        Ok(())
    }
}

impl Batcher for Scatter {
    fn push(&mut self, batch: RecordBatch, ids: &[u32], done: &mut Vec<Routed>) -> Result<()> {
        self.grouped.group(ids);
        // A partition that would outgrow a batch hands over what it has first.
        for partition in 0..self.rows.len() {
            let rows = self.rows[partition];
            if rows > 0 && rows + self.grouped.len(partition) > self.batch_size {
                self.take(partition, done)?;
            }
        }
        for (column, array) in self.columns.iter_mut().zip(batch.columns()) {
            column.append(&array.to_data(), &self.grouped);
        }
        self.buffered_rows += batch.num_rows();
        for partition in 0..self.rows.len() {
            self.rows[partition] += self.grouped.len(partition);
            if self.rows[partition] >= self.batch_size {
                self.take(partition, done)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, done: &mut Vec<Routed>) -> Result<()> {
        for partition in 0..self.rows.len() {
            if self.rows[partition] > 0 {
                self.take(partition, done)?;
            }
        }
        Ok(())
    }

    fn buffered_bytes(&self) -> usize {
        // Values, plus a validity bit each.
        self.buffered_rows * self.row_width + self.buffered_rows * self.columns.len() / 8
    }
}
