//! The map side: one task per input partition reads it to the end, routes every row to its
//! output partition and keeps what it produced, in memory or spilled, until it is read.
//!
//! Spark's sort-based shuffle writer buffers a map task's records tagged with their partition
//! id, sorts them by partition when memory runs out and spills them, and at the end merges the
//! spills into one data file with an index per map task. Here a map task turns its routed rows
//! into batches of about `batch_size` rows per output partition as it goes, so a partition's
//! small share of an input batch never travels alone: copying each value once where every
//! column is of a plain type (`scatter`), else by reordering a few batches at a time and
//! copying out each partition's runs (`gather`). The batches stay in memory, held against the
//! query memory pool by one spillable reservation per map task; when it cannot grow, or when
//! holding more would fill past half of the pool, the task appends everything it holds as one
//! run to its spill file (see `spill`). The other half stays for the operators that run beside
//! the map tasks and for the reduce side: map outputs that filled the pool left the sorts above
//! the exchange no memory, and a sort without memory compares and spills its rows.
//! Where we differ: output that fits stays in memory (Spark always writes files and leans on
//! the OS cache), and spill runs are not merged at the end.

use std::mem;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::DiskManager;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::batcher::{Batcher, Routed};
use super::exchange_metrics::ExchangeMetrics;
use super::exchange_partitioning::ExchangePartitioning;
use super::gather::Gather;
use super::map_part::MapPart;
use super::range_bounds::{KeySample, RangeRouter};
use super::reader::PartsReader;
use super::scatter::Scatter;
use super::spill::MapSpill;
use super::statistics::MapOutputStatistics;
use super::unsafe_row::unsafe_row_bytes;
use crate::storage::bucket_hash::bucket_ids;

/// What one map task produced: a part per output partition and its figures.
pub(super) struct MapOutput {
    parts: Vec<MapPart>,
    bytes: Vec<u64>,
    rows: Vec<u64>,
    /// The rows' size as Spark's `UnsafeRow`s.
    data_size: u64,
}

/// Every map task's output once the map side has run. Each part is handed to as many reads
/// as the exchange has readers (more than one when reused): copies to all but the last.
pub(super) struct MapOutputs {
    parts: Vec<Mutex<(Option<MapPart>, usize)>>,
    partitions: usize,
    readers: usize,
    statistics: Arc<MapOutputStatistics>,
}

impl MapOutputs {
    pub(super) fn new(outputs: Vec<MapOutput>, partitions: usize, readers: usize) -> Self {
        let mut parts = Vec::with_capacity(outputs.len() * partitions);
        let (mut bytes, mut rows) = (Vec::with_capacity(outputs.len()), Vec::with_capacity(outputs.len()));
        let data_size = outputs.iter().map(|output| output.data_size).sum();
        for output in outputs {
            parts.extend(output.parts.into_iter().map(|part| Mutex::new((Some(part), 0))));
            bytes.push(output.bytes);
            rows.push(output.rows);
        }
        let statistics = Arc::new(MapOutputStatistics::new(bytes, rows, data_size, partitions));
        MapOutputs { parts, partitions, readers: readers.max(1), statistics }
    }

    pub(super) fn statistics(&self) -> Arc<MapOutputStatistics> {
        Arc::clone(&self.statistics)
    }

    /// Hands out the parts `(map, partition)`, each once.
    pub(super) fn take(&self, parts: &[(usize, usize)]) -> Result<Vec<MapPart>> {
        parts
            .iter()
            .map(|(map, partition)| {
                let taken = self.parts.get(map * self.partitions + partition).and_then(|part| {
                    let (part, reads) = &mut *part.lock();
                    *reads += 1;
                    if *reads < self.readers { part.as_ref().map(MapPart::copy) } else { part.take() }
                });
                taken.ok_or_else(|| {
                    DataFusionError::Internal(format!(
                        "exchange output of map task {map} for partition {partition} already taken"
                    ))
                })
            })
            .collect()
    }
}

/// Map task `map`: reads input partition `map` to the end and returns what it produced.
pub(super) async fn run_map_task(
    input: Arc<dyn ExecutionPlan>,
    map: usize,
    context: Arc<TaskContext>,
    partitioning: ExchangePartitioning,
    metrics: ExchangeMetrics,
) -> Result<MapOutput> {
    let stream = input.execute(map, Arc::clone(&context))?;
    let partitions = partitioning.partition_count();
    write_map_output(stream, map, partitions, &context, metrics, |batch| match &partitioning {
        ExchangePartitioning::Hash(exprs, n) => {
            let keys =
                exprs.iter().map(|e| e.evaluate(batch)?.into_array(batch.num_rows())).collect::<Result<Vec<_>>>()?;
            Ok(Some(bucket_ids(&keys, batch.num_rows(), *n as u32)?))
        }
        ExchangePartitioning::Single => Ok(None),
        ExchangePartitioning::Range(..) => {
            Err(DataFusionError::Internal("a range exchange's map task needs its bounds first".into()))
        }
    })
    .await
}

/// Range partitioning's first pass over input partition `map`: its rows kept whole (one part)
/// while their sort keys are sampled, since the bounds need every map task's sample.
pub(super) async fn buffer_map_task(
    input: Arc<dyn ExecutionPlan>,
    map: usize,
    context: Arc<TaskContext>,
    mut sample: KeySample,
    metrics: ExchangeMetrics,
) -> Result<(MapOutput, KeySample)> {
    let stream = input.execute(map, Arc::clone(&context))?;
    let output = write_map_output(stream, map, 1, &context, metrics, |batch| {
        sample.offer(batch)?;
        Ok(None)
    })
    .await?;
    Ok((output, sample))
}

/// Range partitioning's second pass: the rows `buffered` kept, routed by `router`.
pub(super) async fn route_map_task(
    buffered: MapOutput,
    map: usize,
    schema: SchemaRef,
    context: Arc<TaskContext>,
    router: RangeRouter,
    reads: Arc<Semaphore>,
    metrics: ExchangeMetrics,
) -> Result<MapOutput> {
    let batch_size = context.session_config().batch_size();
    let stream = PartsReader::new(buffered.parts, Arc::clone(&schema), batch_size, reads).into_stream();
    let stream = Box::pin(RecordBatchStreamAdapter::new(schema, stream));
    let partitions = router.partitions();
    write_map_output(stream, map, partitions, &context, metrics, |batch| router.partition_ids(batch).map(Some)).await
}

/// Routes every batch of `stream` to one of `partitions` outputs: row `i` to `route(batch)[i]`,
/// or all to partition 0 when `route` gives none.
async fn write_map_output(
    mut stream: SendableRecordBatchStream,
    map: usize,
    partitions: usize,
    context: &TaskContext,
    metrics: ExchangeMetrics,
    mut route: impl FnMut(&RecordBatch) -> Result<Option<Vec<u32>>>,
) -> Result<MapOutput> {
    let pool = context.memory_pool();
    let reservation = MemoryConsumer::new(format!("ShuffleExchange[map {map}]")).with_can_spill(true).register(pool);
    let mut writer = MapWriter::new(
        stream.schema(),
        partitions,
        context.session_config().batch_size(),
        (reservation, Arc::clone(pool)),
        Arc::clone(&context.runtime_env().disk_manager),
        metrics,
    );
    let mut first = true;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        let ids = route(&batch)?;
        writer.push(batch, ids.as_deref())?;
        writer.reserve_or_spill().await?;
        // The first task to ask for a broadcast join's hash table builds it and wakes its
        // siblings that waited, into this thread's LIFO slot, which the other threads cannot
        // steal from. A scan's next batch is often ready at once, so without a yield a
        // sibling would wait there for this task's whole input while a core is idle.
        // Yielding on every batch instead moves tasks between threads, and their memory
        // with them.
        if std::mem::take(&mut first) {
            tokio::task::yield_now().await;
        }
    }
    writer.finish().await
}

/// A map task's rows on their way to its output.
struct MapWriter {
    schema: SchemaRef,
    batcher: Box<dyn Batcher>,
    /// Batches per output partition, in memory.
    held: Vec<Vec<RecordBatch>>,
    held_bytes: usize,
    bytes: Vec<u64>,
    rows: Vec<u64>,
    data_size: u64,
    reservation: MemoryReservation,
    pool: Arc<dyn MemoryPool>,
    spill: MapSpill,
    disk: Arc<DiskManager>,
    metrics: ExchangeMetrics,
}

/// The least a map task holds before it spills to keep half of the pool free, so that its
/// spill runs are not tiny when other operators hold that half.
pub(super) const LEAST_RUN_BYTES: usize = 8 << 20;

impl MapWriter {
    fn new(
        schema: SchemaRef,
        partitions: usize,
        batch_size: usize,
        (reservation, pool): (MemoryReservation, Arc<dyn MemoryPool>),
        disk: Arc<DiskManager>,
        metrics: ExchangeMetrics,
    ) -> Self {
        let batch_size = batch_size.max(1);
        let batcher: Box<dyn Batcher> = match Scatter::try_new(Arc::clone(&schema), partitions, batch_size) {
            Some(scatter) => Box::new(scatter),
            None => Box::new(Gather::new(Arc::clone(&schema), partitions, batch_size)),
        };
        MapWriter {
            schema,
            batcher,
            held: vec![Vec::new(); partitions],
            held_bytes: 0,
            bytes: vec![0; partitions],
            rows: vec![0; partitions],
            data_size: 0,
            reservation,
            pool,
            spill: MapSpill::default(),
            disk,
            metrics,
        }
    }

    /// Takes `batch`, whose row `i` goes to partition `ids[i]`; without ids it all goes to the
    /// one partition, as it is.
    fn push(&mut self, batch: RecordBatch, ids: Option<&[u32]>) -> Result<()> {
        self.metrics.rows.add(batch.num_rows());
        self.data_size += unsafe_row_bytes(&batch);
        let mut done = Vec::new();
        match ids {
            Some(ids) => self.batcher.push(batch, ids, &mut done)?,
            None => done.push((0, batch)),
        }
        self.hold(done);
        Ok(())
    }

    fn hold(&mut self, done: Vec<Routed>) {
        for (partition, batch) in done {
            let size = batch.get_array_memory_size();
            self.metrics.bytes.add(size);
            self.bytes[partition] += size as u64;
            self.rows[partition] += batch.num_rows() as u64;
            self.held_bytes += size;
            self.held[partition].push(batch);
        }
    }

    /// Every row the batcher still has, held.
    fn flush(&mut self) -> Result<()> {
        let mut done = Vec::new();
        self.batcher.flush(&mut done)?;
        self.hold(done);
        Ok(())
    }

    /// Holds what the task has against the memory pool, or spills it when the pool says no.
    async fn reserve_or_spill(&mut self) -> Result<()> {
        if !self.hold_in_memory(self.held_bytes + self.batcher.buffered_bytes()) {
            self.spill().await?;
        }
        Ok(())
    }

    /// Whether the task may hold `bytes` in memory: the pool grants them, and they leave half
    /// of a bounded pool free (or are too few to be worth a run of their own).
    fn hold_in_memory(&self, bytes: usize) -> bool {
        let within_half = match self.pool.memory_limit() {
            MemoryLimit::Finite(limit) if bytes >= LEAST_RUN_BYTES => {
                let others = self.pool.reserved().saturating_sub(self.reservation.size());
                others + bytes <= limit / 2
            }
            _ => true,
        };
        within_half && self.reservation.try_resize(bytes).is_ok()
    }

    /// Appends everything the task holds, partition by partition, as one run to its spill file.
    async fn spill(&mut self) -> Result<()> {
        self.flush()?;
        let partitions = self.held.len();
        let run = mem::replace(&mut self.held, vec![Vec::new(); partitions]);
        self.metrics.spills.add(1);
        self.metrics.spilled_bytes.add(mem::take(&mut self.held_bytes));
        self.spill.append(run, Arc::clone(&self.schema), &self.disk, &self.metrics).await?;
        self.reservation.free();
        Ok(())
    }

    async fn finish(mut self) -> Result<MapOutput> {
        self.flush()?;
        if !self.hold_in_memory(self.held_bytes) {
            self.spill().await?;
        }
        let spilled = mem::take(&mut self.spill).into_parts(self.held.len());
        let parts = self
            .held
            .into_iter()
            .zip(spilled)
            .map(|(batches, spilled)| {
                let size = batches.iter().map(RecordBatch::get_array_memory_size).sum();
                MapPart::new(batches.into(), self.reservation.split(size), spilled)
            })
            .collect();
        Ok(MapOutput { parts, bytes: self.bytes, rows: self.rows, data_size: self.data_size })
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    use super::*;

    /// Two map tasks over inputs whose batches are always ready, polled in turn on one thread:
    /// each yields after its first batch, so the other starts before the first goes on.
    #[tokio::test(flavor = "current_thread")]
    async fn map_tasks_yield_after_their_first_batch() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false)]));
        let context = TaskContext::default();
        let metrics = ExecutionPlanMetricsSet::new();
        let reads = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..2).map(|map| {
            let (reads, batch_schema) = (Arc::clone(&reads), Arc::clone(&schema));
            let batches = (0..3).map(move |_| {
                reads.lock().push(map);
                Ok(RecordBatch::try_new(Arc::clone(&batch_schema), vec![Arc::new(Int32Array::from(vec![1, 2]))])?)
            });
            let stream = Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&schema), futures::stream::iter(batches)));
            write_map_output(stream, map, 1, &context, ExchangeMetrics::new(&metrics), |_| Ok(None))
        });
        let outputs = futures::future::try_join_all(tasks).await.unwrap();
        assert_eq!(outputs.iter().map(|output| output.rows.iter().sum::<u64>()).collect::<Vec<_>>(), [6, 6]);
        assert_eq!(*reads.lock(), [0, 1, 0, 0, 1, 1]);
    }
}
