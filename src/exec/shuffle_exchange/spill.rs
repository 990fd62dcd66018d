//! Spilled map output: one local file per map task, written in runs and read back segment by
//! segment.
//!
//! Spark's sort-based shuffle writes every spill of a map task to a file of its own, sorted by
//! partition, and merges them at the end into one data file whose index file gives each
//! partition's (offset, length); a reducer reads its segment of every map task's file. Here a
//! map task appends each spill as a run to one file, created through the runtime's
//! `DiskManager` (so it lands in the spill directory and counts towards its size limit): the
//! partitions in order, each partition's batches as one Arrow IPC stream, its (offset, length)
//! kept in an in-memory index. Runs are not merged, so a reader reads its segment of every run.
//! A map task holds one file however often it spills, and a reader opens the file only for
//! one read (at most `READ_BUDGET` bytes) and closes it again, with at most `CONCURRENT_READS`
//! such reads at once per exchange: the descriptors taken are bounded by the plan, not the
//! data. All file I/O runs on tokio's blocking threads. A file is deleted once no partition has
//! an unread segment in it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::mem;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::buffer::{Buffer, MutableBuffer};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamDecoder;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::common::runtime::SpawnedTask;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SpillFile;
use datafusion::execution::disk_manager::DiskManager;
use tokio::sync::Semaphore;

use super::exchange_metrics::ExchangeMetrics;

/// Spill files of one exchange open for reading at once.
pub(super) const CONCURRENT_READS: usize = 16;
/// Bytes read from a spill file in one go.
pub(super) const READ_BUDGET: u64 = 4 << 20;
const WRITE_BUFFER: usize = 1 << 20;

/// Where one partition's batches of one run are in the file.
#[derive(Debug, Clone, Copy)]
struct Segment {
    offset: u64,
    len: u64,
}

/// A map task's spill file (made on its first spill) and the index of every run in it.
#[derive(Default)]
pub(super) struct MapSpill {
    file: Option<Arc<dyn SpillFile>>,
    len: u64,
    /// Per run, per partition.
    runs: Vec<Vec<Segment>>,
}

impl MapSpill {
    /// Appends `run`, each partition's batches in partition order, to the file.
    pub(super) async fn append(
        &mut self,
        run: Vec<Vec<RecordBatch>>,
        schema: SchemaRef,
        disk: &Arc<DiskManager>,
        metrics: &ExchangeMetrics,
    ) -> Result<()> {
        if self.file.is_none() {
            metrics.spill_files.add(1);
        }
        let (file, disk, start) = (self.file.clone(), Arc::clone(disk), self.len);
        let (file, segments) = SpawnedTask::spawn_blocking(move || {
            let file = match file {
                Some(file) => file,
                None => disk.create_tmp_file("shuffle exchange")?,
            };
            let segments = write_run(file.as_ref(), start, &run, &schema)?;
            Ok::<_, DataFusionError>((file, segments))
        })
        .await
        .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
        self.len = segments.last().map_or(start, |s| s.offset + s.len);
        self.file = Some(file);
        self.runs.push(segments);
        Ok(())
    }

    /// Each partition's segments of every run, with the file they are in.
    pub(super) fn into_parts(self, partitions: usize) -> Vec<Option<SpilledSegments>> {
        (0..partitions)
            .map(|partition| {
                let segments: VecDeque<Segment> =
                    self.runs.iter().map(|run| run[partition]).filter(|segment| segment.len > 0).collect();
                let file = self.file.as_ref().filter(|_| !segments.is_empty())?;
                Some(SpilledSegments { file: Arc::clone(file), segments, decoder: StreamDecoder::new() })
            })
            .collect()
    }
}

/// Writes each partition's batches of `run` as one IPC stream, from byte `start` of `file`.
fn write_run(file: &dyn SpillFile, start: u64, run: &[Vec<RecordBatch>], schema: &SchemaRef) -> Result<Vec<Segment>> {
    if file.size().is_some_and(|size| size != start) {
        return Err(DataFusionError::Internal(format!("shuffle spill file is not {start} bytes long")));
    }
    let mut out = Counted { inner: BufWriter::with_capacity(WRITE_BUFFER, file.open_writer()?), written: start };
    let mut segments = Vec::with_capacity(run.len());
    for batches in run {
        let offset = out.written;
        if !batches.is_empty() {
            let mut writer = StreamWriter::try_new(&mut out, schema)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
        segments.push(Segment { offset, len: out.written - offset });
    }
    out.inner.into_inner().map_err(|e| DataFusionError::IoError(e.into_error()))?.finish()?;
    Ok(segments)
}

/// A writer that knows where in the file it is. (The spill writer appends where the last one
/// stopped, as it shares the file's position.)
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One partition's segments in one map task's spill file, read back in order. Holding it keeps
/// the file; the file goes when the last of these is dropped.
pub(super) struct SpilledSegments {
    file: Arc<dyn SpillFile>,
    segments: VecDeque<Segment>,
    /// Decodes the segment being read, which may come in several reads.
    decoder: StreamDecoder,
}

impl SpilledSegments {
    /// The same segments, to be read again from the start.
    pub(super) fn copy(&self) -> Self {
        SpilledSegments { file: Arc::clone(&self.file), segments: self.segments.clone(), decoder: StreamDecoder::new() }
    }

    /// The batches of the next read from the file; `None` once every segment is read.
    pub(super) async fn next_batches(&mut self, reads: &Semaphore) -> Result<Option<Vec<RecordBatch>>> {
        if self.segments.is_empty() {
            return Ok(None);
        }
        let path = self
            .file
            .path()
            .ok_or_else(|| DataFusionError::Internal("spill file has no local path".into()))?
            .to_path_buf();
        let segments = mem::take(&mut self.segments);
        let permit = reads.acquire().await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        let (segments, chunks) = SpawnedTask::spawn_blocking(move || read_chunks(&path, segments))
            .await
            .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
        drop(permit);
        self.segments = segments;
        let mut batches = Vec::new();
        for Chunk { mut bytes, ends_segment } in chunks {
            while !bytes.is_empty() {
                if let Some(batch) = self.decoder.decode(&mut bytes)? {
                    batches.push(batch);
                }
            }
            if ends_segment {
                mem::take(&mut self.decoder).finish()?;
            }
        }
        Ok(Some(batches))
    }
}

/// Bytes read from one segment.
struct Chunk {
    bytes: Buffer,
    /// Whether the segment's last byte is in it.
    ends_segment: bool,
}

/// Opens the file, reads up to `READ_BUDGET` bytes from the front segments and closes it.
/// Returns the segments left and the chunks read.
fn read_chunks(path: &Path, mut segments: VecDeque<Segment>) -> Result<(VecDeque<Segment>, Vec<Chunk>)> {
    let mut file = File::open(path)?;
    let mut chunks = Vec::new();
    let mut budget = READ_BUDGET;
    while budget > 0
        && let Some(segment) = segments.front_mut()
    {
        let len = segment.len.min(budget);
        let mut bytes = MutableBuffer::from_len_zeroed(len as usize);
        file.seek(SeekFrom::Start(segment.offset))?;
        file.read_exact(bytes.as_slice_mut())?;
        segment.offset += len;
        segment.len -= len;
        budget -= len;
        let ends_segment = segment.len == 0;
        if ends_segment {
            segments.pop_front();
        }
        chunks.push(Chunk { bytes: bytes.into(), ends_segment });
    }
    Ok((segments, chunks))
}
