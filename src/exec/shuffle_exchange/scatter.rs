//! Routing a map task's rows where every column is of a plain type (fixed-width ones such as
//! integers, floats, dates, timestamps, decimals and intervals; booleans; strings and binaries,
//! as offsets or as views): each input batch's rows are grouped by partition (a counting sort of
//! their ids), then each column appends, partition by partition, its values of those rows to
//! the partition's buffers; a partition's buffers become a batch once they hold `batch_size`
//! rows.
//!
//! Each value is copied once, read from a batch that is in cache and written in one run per
//! partition. (Reordering a few batches and then gathering each partition's runs, as `gather`
//! does for other types, copies every value twice, the second time from rows that have left
//! the cache once partitions × `batch_size` rows wait; writing row by row to the partition of
//! each touches a page per partition, too many at Spark's 200.) Fixed-width values move as
//! plain words of their width, whatever their type, into a buffer that takes room for
//! `batch_size` values when its partition first gets a row; memory is counted by the values
//! written, the pages in use.

use std::mem;
use std::sync::Arc;

use datafusion::arrow::array::builder::{BooleanBufferBuilder, NullBufferBuilder};
use datafusion::arrow::array::{ArrayData, ArrayRef, OffsetSizeTrait, RecordBatch, RecordBatchOptions, make_array};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer};
use datafusion::arrow::datatypes::{ArrowNativeType, DataType, SchemaRef, i256};
use datafusion::error::{DataFusionError, Result};

use super::batcher::{Batcher, Routed};
use super::grouped::Grouped;

/// One column's values waiting in each partition.
trait ColumnBuffers: Send {
    /// Appends each partition's rows of `array`, partition by partition, so that each writes
    /// its values in one go, reading them from a batch that is in cache.
    fn append(&mut self, array: &ArrayData, grouped: &Grouped) -> Result<()>;
    /// Partition `partition`'s values as an array, leaving it none.
    fn take(&mut self, partition: usize) -> Result<ArrayRef>;
    /// The memory the values waiting take.
    fn buffered_bytes(&self) -> usize;
}

/// One partition's values of a column of some type, without their validity.
trait Values: Send {
    /// What `append` reads of one input array.
    type Source<'a>;
    fn new(batch_size: usize) -> Self;
    fn source(array: &ArrayData) -> Self::Source<'_>;
    /// Appends the values of `rows` of `source`.
    fn append(&mut self, source: &Self::Source<'_>, rows: &[u32]) -> Result<()>;
    /// The buffers of the values appended, leaving none.
    fn take(&mut self) -> Vec<Buffer>;
    fn bytes(&self) -> usize;
}

/// A column's values and validity per partition.
struct Column<V> {
    data_type: DataType,
    values: Vec<V>,
    nulls: Vec<NullBufferBuilder>,
}

impl<V: Values + 'static> Column<V> {
    fn boxed(data_type: DataType, partitions: usize, batch_size: usize) -> Box<dyn ColumnBuffers> {
        Box::new(Column {
            data_type,
            values: (0..partitions).map(|_| V::new(batch_size)).collect(),
            nulls: (0..partitions).map(|_| NullBufferBuilder::new(batch_size)).collect(),
        })
    }
}

impl<V: Values> ColumnBuffers for Column<V> {
    fn append(&mut self, array: &ArrayData, grouped: &Grouped) -> Result<()> {
        let source = V::source(array);
        let nulls = array.nulls().filter(|nulls| nulls.null_count() > 0);
        for ((values, validity), rows) in self.values.iter_mut().zip(&mut self.nulls).zip(grouped.partitions()) {
            if rows.is_empty() {
                continue;
            }
            values.append(&source, rows)?;
            match nulls {
                Some(nulls) => rows.iter().for_each(|row| validity.append(nulls.is_valid(*row as usize))),
                None => validity.append_n_non_nulls(rows.len()),
            }
        }
        Ok(())
    }

    fn take(&mut self, partition: usize) -> Result<ArrayRef> {
        let validity = &mut self.nulls[partition];
        let len = validity.len();
        let data = ArrayData::builder(self.data_type.clone())
            .len(len)
            .buffers(self.values[partition].take())
            .nulls(validity.finish())
            .build()?;
        Ok(make_array(data))
    }

    fn buffered_bytes(&self) -> usize {
        let validity: usize = self.nulls.iter().map(|nulls| nulls.len().div_ceil(8)).sum();
        self.values.iter().map(V::bytes).sum::<usize>() + validity
    }
}

/// A value moved as its bytes.
trait Word: ArrowNativeType {
    /// Appends to `out` the values of `rows` of `bytes`, where the values lie end to end.
    fn gather(bytes: &[u8], rows: &[u32], out: &mut Vec<Self>);
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            fn gather(bytes: &[u8], rows: &[u32], out: &mut Vec<Self>) {
                let (values, _) = bytes.as_chunks::<{ mem::size_of::<$t>() }>();
                out.extend(rows.iter().map(|row| <$t>::from_le_bytes(values[*row as usize])));
            }
        }
    )*};
}
word!(u8, u16, u32, u64, u128, i256);

/// Values of a fixed width, moved as words of that width whatever their type. The buffer
/// takes room for `batch_size` values when its partition first gets a row.
struct Fixed<T> {
    values: Vec<T>,
    batch_size: usize,
}

impl<T: Word> Values for Fixed<T> {
    type Source<'a> = &'a [u8];

    fn new(batch_size: usize) -> Self {
        Fixed { values: Vec::new(), batch_size }
    }

    fn source(array: &ArrayData) -> &[u8] {
        let width = mem::size_of::<T>();
        &array.buffers()[0].as_slice()[array.offset() * width..][..array.len() * width]
    }

    fn append(&mut self, bytes: &&[u8], rows: &[u32]) -> Result<()> {
        reserve_first(&mut self.values, self.batch_size, 1);
        T::gather(bytes, rows, &mut self.values);
        Ok(())
    }

    fn take(&mut self) -> Vec<Buffer> {
        vec![into_buffer(mem::take(&mut self.values))]
    }

    fn bytes(&self) -> usize {
        self.values.len() * mem::size_of::<T>()
    }
}

/// Booleans, a bit each.
struct Booleans(BooleanBufferBuilder);

impl Values for Booleans {
    type Source<'a> = BooleanBuffer;

    fn new(batch_size: usize) -> Self {
        Booleans(BooleanBufferBuilder::new(batch_size))
    }

    fn source(array: &ArrayData) -> BooleanBuffer {
        BooleanBuffer::new(array.buffers()[0].clone(), array.offset(), array.len())
    }

    fn append(&mut self, source: &BooleanBuffer, rows: &[u32]) -> Result<()> {
        rows.iter().for_each(|row| self.0.append(source.value(*row as usize)));
        Ok(())
    }

    fn take(&mut self) -> Vec<Buffer> {
        vec![self.0.finish().into_inner()]
    }

    fn bytes(&self) -> usize {
        self.0.len().div_ceil(8)
    }
}

/// Room a partition's buffer takes on its first row: a batch's worth of values at the input's
/// average size, at most [`FIRST_ROOM`] bytes, so that it rarely grows (copying itself) on the
/// way to a batch.
fn reserve_first<T>(buffer: &mut Vec<T>, batch_size: usize, average: usize) {
    if buffer.capacity() == 0 {
        buffer.reserve_exact((batch_size * average).min(FIRST_ROOM / mem::size_of::<T>().max(1)));
    }
}

const FIRST_ROOM: usize = 1 << 20;

/// `values` as a buffer. One that filled little of the room it took (a task's last batches, a
/// partition with few rows) gives the rest back: a batch's size is what the exchange's
/// statistics, and so adaptive execution, go by.
fn into_buffer<T: ArrowNativeType>(mut values: Vec<T>) -> Buffer {
    if values.len() < values.capacity() / 2 {
        values.shrink_to_fit();
    }
    Buffer::from_vec(values)
}

/// Strings or binaries as offsets into their bytes (`Utf8`, `Binary` and their `Large` kinds).
struct Offsets<O> {
    offsets: Vec<O>,
    data: Vec<u8>,
    batch_size: usize,
}

impl<O: OffsetSizeTrait> Values for Offsets<O> {
    /// The array's offsets (one more than its values), and the bytes they point into.
    type Source<'a> = (&'a [O], &'a [u8]);

    fn new(batch_size: usize) -> Self {
        Offsets { offsets: Vec::new(), data: Vec::new(), batch_size }
    }

    fn source(array: &ArrayData) -> (&[O], &[u8]) {
        (&array.buffer::<O>(0)[..array.len() + 1], array.buffers()[1].as_slice())
    }

    fn append(&mut self, (offsets, bytes): &(&[O], &[u8]), rows: &[u32]) -> Result<()> {
        if self.offsets.is_empty() {
            reserve_first(&mut self.offsets, self.batch_size + 1, 1);
            self.offsets.push(O::zero());
        }
        let values = offsets.len() - 1;
        let average = (offsets[values].as_usize() - offsets[0].as_usize()).div_ceil(values.max(1));
        reserve_first(&mut self.data, self.batch_size, average);
        for row in rows {
            let (start, end) = (offsets[*row as usize].as_usize(), offsets[*row as usize + 1].as_usize());
            self.data.extend_from_slice(&bytes[start..end]);
            self.offsets.push(O::from_usize(self.data.len()).ok_or_else(too_long)?);
        }
        Ok(())
    }

    fn take(&mut self) -> Vec<Buffer> {
        let mut offsets = mem::take(&mut self.offsets);
        if offsets.is_empty() {
            offsets.push(O::zero());
        }
        vec![into_buffer(offsets), into_buffer(mem::take(&mut self.data))]
    }

    fn bytes(&self) -> usize {
        self.offsets.len() * mem::size_of::<O>() + self.data.len()
    }
}

/// Strings or binaries as views (`Utf8View`, `BinaryView`): a value of at most 12 bytes lives
/// in its view and moves with it; a longer one is copied to the partition's one data buffer
/// and its view pointed there.
struct Views {
    views: Vec<u128>,
    data: Vec<u8>,
    batch_size: usize,
}

/// The longest value a view holds itself.
const INLINE: u32 = 12;

impl Values for Views {
    /// The views of the array's values, and its data buffers.
    type Source<'a> = (&'a [u128], &'a [Buffer]);

    fn new(batch_size: usize) -> Self {
        Views { views: Vec::new(), data: Vec::new(), batch_size }
    }

    fn source(array: &ArrayData) -> (&[u128], &[Buffer]) {
        (&array.buffer::<u128>(0)[..array.len()], &array.buffers()[1..])
    }

    fn append(&mut self, (views, buffers): &(&[u128], &[Buffer]), rows: &[u32]) -> Result<()> {
        reserve_first(&mut self.views, self.batch_size, 1);
        let long_bytes: usize = buffers.iter().map(Buffer::len).sum();
        reserve_first(&mut self.data, self.batch_size, long_bytes.div_ceil(views.len().max(1)));
        for row in rows {
            let view = views[*row as usize];
            let len = view as u32;
            if len <= INLINE {
                self.views.push(view);
                continue;
            }
            let (buffer, offset) = ((view >> 64) as u32 as usize, (view >> 96) as u32 as usize);
            let moved_to = u32::try_from(self.data.len()).map_err(|_| too_long())?;
            self.data.extend_from_slice(&buffers[buffer].as_slice()[offset..offset + len as usize]);
            // Length and prefix kept; buffer 0, at its new offset.
            self.views.push((view & u128::from(u64::MAX)) | (u128::from(moved_to) << 96));
        }
        Ok(())
    }

    fn take(&mut self) -> Vec<Buffer> {
        vec![into_buffer(mem::take(&mut self.views)), into_buffer(mem::take(&mut self.data))]
    }

    fn bytes(&self) -> usize {
        self.views.len() * mem::size_of::<u128>() + self.data.len()
    }
}

fn too_long() -> DataFusionError {
    DataFusionError::ResourcesExhausted("one partition's strings in a batch exceed what a batch can hold".into())
}

/// Buffers for a column of `data_type`; `None` for types routed by `gather`.
fn column_buffers(data_type: &DataType, partitions: usize, batch_size: usize) -> Option<Box<dyn ColumnBuffers>> {
    let new = match data_type {
        DataType::Boolean => Column::<Booleans>::boxed,
        DataType::Utf8 | DataType::Binary => Column::<Offsets<i32>>::boxed,
        DataType::LargeUtf8 | DataType::LargeBinary => Column::<Offsets<i64>>::boxed,
        DataType::Utf8View | DataType::BinaryView => Column::<Views>::boxed,
        other => match other.primitive_width()? {
            1 => Column::<Fixed<u8>>::boxed,
            2 => Column::<Fixed<u16>>::boxed,
            4 => Column::<Fixed<u32>>::boxed,
            8 => Column::<Fixed<u64>>::boxed,
            16 => Column::<Fixed<u128>>::boxed,
            32 => Column::<Fixed<i256>>::boxed,
            _ => return None,
        },
    };
    Some(new(data_type.clone(), partitions, batch_size))
}

pub(super) struct Scatter {
    schema: SchemaRef,
    batch_size: usize,
    columns: Vec<Box<dyn ColumnBuffers>>,
    /// Rows waiting per partition.
    rows: Vec<usize>,
    /// The input batch being routed, by partition.
    grouped: Grouped,
}

impl Scatter {
    /// `None` when a column's type is not one it routes.
    pub(super) fn try_new(schema: SchemaRef, partitions: usize, batch_size: usize) -> Option<Self> {
        let columns = schema
            .fields()
            .iter()
            .map(|field| column_buffers(field.data_type(), partitions, batch_size))
            .collect::<Option<Vec<_>>>()?;
        Some(Scatter { schema, batch_size, columns, rows: vec![0; partitions], grouped: Grouped::new(partitions) })
    }

    fn take(&mut self, partition: usize, done: &mut Vec<Routed>) -> Result<()> {
        let rows = mem::take(&mut self.rows[partition]);
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
            column.append(&array.to_data(), &self.grouped)?;
        }
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
        self.columns.iter().map(|column| column.buffered_bytes()).sum()
    }
}
