//! Writes a query's output as Parquet files, one writer per input partition, as many at once
//! as the session has cores, so every core works on a large write and the files open at once
//! stay few whatever the bucket count.
//!
//! For partitioned tables the input arrives sorted, within each input partition, by
//! (partition values, sort columns), as Spark's writer sorts it; a new file starts whenever the
//! partition changes. For bucketed tables input partition `i` holds bucket `i`. So one write
//! adds at most one file per (partition, bucket) and input partition.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::compute::kernels::partition::partition;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::arrow::async_writer::AsyncFileWriter;
use datafusion::parquet::arrow::{ArrowSchemaConverter, AsyncArrowWriter, parquet_column};
use datafusion::parquet::basic::{Compression, Encoding};
use datafusion::parquet::file::metadata::SortingColumn;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::ColumnPath;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::fs::File;
use tokio::sync::Semaphore;

use super::file_naming::data_file_name;
use super::object_upload::ObjectUpload;
use super::partition_path::partition_path;
use super::write_target::WriteTarget;
use crate::catalog::location::Location;
use crate::error::SqlError;

/// A file written by a write that has not been published, so not yet part of any table.
#[derive(Debug, Clone)]
pub struct StagedFile {
    /// Path relative to the table location once published.
    pub relative: String,
    pub partition: String,
    pub bucket: Option<u32>,
    /// Where it was written: in the staging directory, or (on object storage) in place.
    pub staged: Location,
    pub rows: u64,
    pub bytes: u64,
}

/// Which input columns decide where a row goes, and which are stored in the files.
#[derive(Debug, Clone)]
pub struct WriteLayout {
    /// Partition columns: input index and name, in `PARTITIONED BY` order.
    pub partition_columns: Vec<(usize, String)>,
    /// Whether input partition `i` holds the rows of bucket `i` (a bucketed table).
    pub bucketed: bool,
    /// Input indices of the columns stored in the files (not the partition columns, which
    /// live in directory names).
    pub data_columns: Vec<usize>,
    pub file_schema: SchemaRef,
    /// Names of the file columns each file is sorted by (ascending, nulls first), declared in
    /// every row group's metadata (Parquet's `sorting_columns`) so that readers, `SHOW
    /// BUCKETS` among them, can tell a sorted file without reading it.
    pub sorted_by: Vec<String>,
}

impl WriteLayout {
    /// Every input column goes into one file per input partition.
    pub fn unpartitioned(schema: SchemaRef) -> Self {
        WriteLayout {
            partition_columns: Vec::new(),
            bucketed: false,
            data_columns: (0..schema.fields().len()).collect(),
            file_schema: schema,
            sorted_by: Vec::new(),
        }
    }

    fn key_columns(&self) -> Vec<usize> {
        self.partition_columns.iter().map(|(i, _)| *i).collect()
    }
}

/// Spark's row group size (`parquet.block.size`).
const ROW_GROUP_BYTES: usize = 128 << 20;

/// Snappy is what Spark writes by default, and what its file names announce. A row group
/// closes at `row_group_bytes` encoded (or Parquet's million rows). The first SORTED BY
/// column, where it holds integers, is delta-encoded instead of dictionary-encoded: its values
/// only grow, so the deltas pack into a few bits each with no dictionary to look each value up
/// in (Spark reads the encoding since 3.3).
fn writer_properties(row_group_bytes: usize, layout: &WriteLayout) -> WriterProperties {
    let sorting_columns = sorting_columns(&layout.file_schema, &layout.sorted_by);
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_bytes(Some(row_group_bytes))
        .set_sorting_columns((!sorting_columns.is_empty()).then_some(sorting_columns))
        // Exact bounds for long strings too, so that a bucket's key range is real values.
        .set_statistics_truncate_length(None);
    let leading = layout.sorted_by.first().and_then(|name| layout.file_schema.field_with_name(name).ok());
    if let Some(field) = leading.filter(|f| f.data_type().is_integer()) {
        let path = ColumnPath::from(field.name().as_str());
        properties = properties
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    properties.build()
}

/// Parquet's declaration that rows are sorted by `columns`: their leaf column indices, for
/// the longest prefix of them that are leaves (a nested column has no single leaf to name).
pub(super) fn sorting_columns(schema: &Schema, columns: &[String]) -> Vec<SortingColumn> {
    let Ok(leaves) = ArrowSchemaConverter::new().convert(schema) else { return Vec::new() };
    columns
        .iter()
        .map_while(|name| {
            let (leaf, field) = parquet_column(&leaves, schema, name)?;
            (!field.data_type().is_nested()).then_some(SortingColumn {
                column_idx: leaf as i32,
                descending: false,
                nulls_first: true,
            })
        })
        .collect()
}

/// A writer holds its open row group in memory, outside the memory pool, until the group
/// closes. As parquet-mr's `MemoryManager` shrinks row groups so that all open writers fit its
/// pool, the writers of one write keep together to an eighth of the memory limit.
fn row_group_bytes(limit: MemoryLimit, writers: usize) -> usize {
    match limit {
        MemoryLimit::Finite(limit) => (limit / 8 / writers.max(1)).clamp(1 << 20, ROW_GROUP_BYTES),
        _ => ROW_GROUP_BYTES,
    }
}

/// Runs `plan` and writes each output partition's rows to `target`, in files named with
/// `write_id`.
pub async fn write_partitions(
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<TaskContext>,
    layout: WriteLayout,
    target: &WriteTarget,
    write_id: uuid::Uuid,
) -> Result<Vec<StagedFile>, SqlError> {
    if let WriteTarget::Staging(dir) = target {
        tokio::fs::create_dir_all(dir).await?;
    }
    let layout = Arc::new(layout);
    let partitions = plan.properties().output_partitioning().partition_count();
    let writers = partitions.min(task_ctx.session_config().target_partitions().max(1));
    let properties = writer_properties(row_group_bytes(task_ctx.memory_pool().memory_limit(), writers), &layout);
    let turns = Arc::new(Semaphore::new(writers));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..partitions {
        let plan = Arc::clone(&plan);
        let task_ctx = Arc::clone(&task_ctx);
        let turns = Arc::clone(&turns);
        let mut writer = SplittingWriter {
            layout: Arc::clone(&layout),
            target: target.clone(),
            write_id,
            task,
            properties: properties.clone(),
            open: None,
            done: Vec::new(),
        };
        tasks.spawn(async move {
            let _turn = turns.acquire_owned().await.map_err(|e| SqlError::internal(e.to_string()))?;
            let stream = plan.execute(task, task_ctx)?;
            writer.write_all(stream).await?;
            Ok::<_, SqlError>(writer.done)
        });
    }
    let mut files = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.map_err(|e| SqlError::internal(format!("write task failed: {e}"))).and_then(|done| done) {
            Ok(done) => files.extend(done),
            Err(e) => {
                // The other writers stop before the error returns, so that none of them adds a
                // file to the staging directory after the failed write has removed it.
                tasks.shutdown().await;
                return Err(e);
            }
        }
    }
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(files)
}

/// A file's bytes on their way: to a local file, or uploaded to an object store in parts.
enum Sink {
    Local(File),
    Object(ObjectUpload),
}

impl AsyncFileWriter for Sink {
    fn write(&mut self, bytes: bytes::Bytes) -> BoxFuture<'_, datafusion::parquet::errors::Result<()>> {
        match self {
            Sink::Local(file) => AsyncFileWriter::write(file, bytes),
            Sink::Object(upload) => Box::pin(upload.write(bytes)),
        }
    }

    fn complete(&mut self) -> BoxFuture<'_, datafusion::parquet::errors::Result<()>> {
        match self {
            Sink::Local(file) => file.complete(),
            Sink::Object(upload) => Box::pin(upload.complete()),
        }
    }
}

struct OpenFile {
    partition: String,
    bucket: Option<u32>,
    file: StagedFile,
    writer: AsyncArrowWriter<Sink>,
}

/// One input partition's writer: one open file at a time, switched on key changes.
struct SplittingWriter {
    layout: Arc<WriteLayout>,
    target: WriteTarget,
    write_id: uuid::Uuid,
    task: usize,
    properties: WriterProperties,
    open: Option<OpenFile>,
    done: Vec<StagedFile>,
}

impl SplittingWriter {
    async fn write_all(&mut self, mut stream: SendableRecordBatchStream) -> Result<(), SqlError> {
        let keys = self.layout.key_columns();
        let bucket = self.layout.bucketed.then_some(self.task as u32);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            if keys.is_empty() {
                self.write_rows(&batch, 0, batch.num_rows(), String::new(), bucket).await?;
                continue;
            }
            let key_arrays: Vec<ArrayRef> = keys.iter().map(|i| Arc::clone(batch.column(*i))).collect();
            for range in partition(&key_arrays)?.ranges() {
                let partition = self.partition_of(&batch, range.start)?;
                self.write_rows(&batch, range.start, range.end - range.start, partition, bucket).await?;
            }
        }
        self.close().await
    }

    fn partition_of(&self, batch: &RecordBatch, row: usize) -> Result<String, SqlError> {
        let values: Vec<(&str, ArrayRef)> = self
            .layout
            .partition_columns
            .iter()
            .map(|(i, name)| (name.as_str(), batch.column(*i).slice(row, 1)))
            .collect();
        partition_path(&values)
    }

    async fn write_rows(
        &mut self,
        batch: &RecordBatch,
        offset: usize,
        len: usize,
        partition: String,
        bucket: Option<u32>,
    ) -> Result<(), SqlError> {
        let same_file = self.open.as_ref().is_some_and(|o| o.partition == partition && o.bucket == bucket);
        if !same_file {
            self.close().await?;
            self.open = Some(self.open_file(partition, bucket).await?);
        }
        let columns: Vec<ArrayRef> =
            self.layout.data_columns.iter().map(|i| batch.column(*i).slice(offset, len)).collect();
        let rows = RecordBatch::try_new(Arc::clone(&self.layout.file_schema), columns)?;
        let open = self.open.as_mut().expect("opened above");
        open.file.rows += len as u64;
        open.writer.write(&rows).await?;
        Ok(())
    }

    async fn open_file(&mut self, partition: String, bucket: Option<u32>) -> Result<OpenFile, SqlError> {
        let name = data_file_name(self.task, &self.write_id, bucket);
        let relative = if partition.is_empty() { name } else { format!("{partition}/{name}") };
        let (staged, sink) = match &self.target {
            WriteTarget::Staging(dir) => {
                let staged = dir.join(&relative);
                // Made in place, not on a blocking thread as tokio's calls are: a failed write
                // stops its writers and removes the staging directory, and a creation still
                // under way on another thread would make the directory again afterwards.
                if let Some(parent) = staged.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let file = File::from_std(std::fs::File::create(&staged)?);
                (Location::Local(staged), Sink::Local(file))
            }
            WriteTarget::InPlace(write) => {
                let (location, key) = write.begin(&relative)?;
                (location.clone(), Sink::Object(ObjectUpload::new(Arc::clone(write), location, key)))
            }
        };
        let writer =
            AsyncArrowWriter::try_new(sink, Arc::clone(&self.layout.file_schema), Some(self.properties.clone()))?;
        Ok(OpenFile {
            file: StagedFile { relative, partition: partition.clone(), bucket, staged, rows: 0, bytes: 0 },
            partition,
            bucket,
            writer,
        })
    }

    async fn close(&mut self) -> Result<(), SqlError> {
        if let Some(mut open) = self.open.take() {
            open.writer.finish().await?;
            let mut file = open.file;
            file.bytes = open.writer.bytes_written() as u64;
            match open.writer.into_inner() {
                // On disk before the commit names it: a power loss must not leave the
                // metastore listing a file whose bytes were still in the page cache.
                Sink::Local(written) => written.sync_all().await?,
                Sink::Object(_) => {}
            }
            self.done.push(file);
        }
        Ok(())
    }
}

impl From<datafusion::parquet::errors::ParquetError> for SqlError {
    fn from(e: datafusion::parquet::errors::ParquetError) -> Self {
        crate::error::parquet_failure(&e, "could not write table files", "could not write parquet")
    }
}
