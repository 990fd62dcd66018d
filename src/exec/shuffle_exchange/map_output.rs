//! The map side: one task per input partition reads it to the end, routes every row to its
//! output partition and keeps what it produced, in memory or spilled, until it is read.
//!
//! Spark's sort-based shuffle writer buffers a map task's records tagged with their partition
//! id, sorts them by partition when memory runs out and spills them, and at the end merges the
//! spills into one data file with an index per map task. Here a map task buffers its input
//! batches, each reordered by partition as it arrives, and per output partition the runs of rows
//! bound for it; every `partitions × batch_size` rows, on a spill and at the end it copies each
//! partition's runs into batches of at most `batch_size` rows, so a partition's small share of
//! an input batch never travels alone. The gathered batches stay in memory,
//! held against the query memory pool by one spillable reservation per map task; when it cannot
//! grow, the task appends everything it holds as one run to its spill file (see `spill`).
//! Where we differ: output that fits stays in memory (Spark always writes files and leans on
//! the OS cache), and spill runs are not merged at the end.

use std::collections::VecDeque;
use std::mem;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayData, MutableArrayData, RecordBatch, RecordBatchOptions, make_array};
use datafusion::arrow::compute::interleave_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::DiskManager;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::ExchangePartitioning;
use super::range_bounds::{KeySample, RangeRouter};
use super::reader::PartsReader;
use super::spill::{MapSpill, SpilledSegments};
use super::statistics::MapOutputStatistics;
use crate::storage::bucket_hash::bucket_ids;

/// What EXPLAIN ANALYZE shows of the exchange, shared by its map tasks.
#[derive(Clone)]
pub(super) struct ExchangeMetrics {
    rows: Count,
    bytes: Count,
    spills: Count,
    spilled_bytes: Count,
    pub(super) spill_files: Count,
}

impl ExchangeMetrics {
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet) -> Self {
        ExchangeMetrics {
            rows: MetricBuilder::new(metrics).counter("shuffle_rows", 0),
            bytes: MetricBuilder::new(metrics).counter("shuffle_bytes", 0),
            spills: MetricBuilder::new(metrics).spill_count(0),
            spilled_bytes: MetricBuilder::new(metrics).spilled_bytes(0),
            spill_files: MetricBuilder::new(metrics).counter("spill_files", 0),
        }
    }

    /// The same spill figures, with rows and bytes counted apart: a first pass over rows that
    /// are shuffled in the second.
    pub(super) fn first_pass(&self) -> Self {
        ExchangeMetrics { rows: Count::new(), bytes: Count::new(), ..self.clone() }
    }
}

/// One map task's output for one partition: batches held in memory (reserved until read),
/// then segments spilled to the map task's file.
pub(super) struct MapPart {
    batches: VecDeque<RecordBatch>,
    reservation: MemoryReservation,
    spilled: Option<SpilledSegments>,
}

impl MapPart {
    /// The next batch held in memory; its memory goes back to the pool.
    pub(super) fn pop(&mut self) -> Option<RecordBatch> {
        let batch = self.batches.pop_front()?;
        self.reservation.shrink(batch.get_array_memory_size().min(self.reservation.size()));
        Some(batch)
    }

    pub(super) fn take_spilled(&mut self) -> Option<SpilledSegments> {
        self.spilled.take()
    }

    /// A copy for a reader other than the last: the same batches and spilled segments, whose
    /// memory and file stay with this part until the last reader takes it.
    fn copy(&self) -> Self {
        MapPart {
            batches: self.batches.clone(),
            reservation: self.reservation.new_empty(),
            spilled: self.spilled.as_ref().map(SpilledSegments::copy),
        }
    }
}

/// What one map task produced: a part per output partition and its figures.
pub(super) struct MapOutput {
    parts: Vec<MapPart>,
    bytes: Vec<u64>,
    rows: Vec<u64>,
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
        for output in outputs {
            parts.extend(output.parts.into_iter().map(|part| Mutex::new((Some(part), 0))));
            bytes.push(output.bytes);
            rows.push(output.rows);
        }
        let statistics = Arc::new(MapOutputStatistics::new(bytes, rows, partitions));
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
    let reservation =
        MemoryConsumer::new(format!("ShuffleExchange[map {map}]")).with_can_spill(true).register(context.memory_pool());
    let mut writer = MapWriter::new(
        stream.schema(),
        partitions,
        context.session_config().batch_size(),
        reservation,
        Arc::clone(&context.runtime_env().disk_manager),
        metrics,
    );
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        let ids = route(&batch)?;
        writer.push(batch, ids.as_deref())?;
        writer.reserve_or_spill().await?;
    }
    writer.finish().await
}

/// The rows per output partition a map task reorders together, on average: fewer make each
/// partition's share of them a copy too short to be worth its call.
const ROWS_PER_RUN: usize = 256;

/// Rows `start..end` of pending batch `batch`.
#[derive(Clone, Copy)]
struct Run {
    batch: u32,
    start: u32,
    end: u32,
}

impl Run {
    fn len(&self) -> u32 {
        self.end - self.start
    }
}

/// `runs` cut into pieces of at most `batch_size` rows, a run split where a piece fills up.
fn chunks_of_rows(runs: &[Run], batch_size: usize) -> Vec<Vec<Run>> {
    let batch_size = batch_size as u32;
    let mut chunks = Vec::new();
    let (mut chunk, mut rows) = (Vec::new(), 0);
    for run in runs {
        let mut run = *run;
        while run.len() > 0 {
            let taken = run.len().min(batch_size - rows);
            chunk.push(Run { end: run.start + taken, ..run });
            run.start += taken;
            rows += taken;
            if rows == batch_size {
                chunks.push(mem::take(&mut chunk));
                rows = 0;
            }
        }
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// A map task's rows on their way to its output.
struct MapWriter {
    schema: SchemaRef,
    batch_size: usize,
    /// Routed input batches not reordered yet, and the partition of each of their rows.
    staged: Vec<RecordBatch>,
    staged_ids: Vec<u32>,
    /// Input batches not gathered yet, each ordered by partition, and per output partition the
    /// runs of those batches bound for it.
    pending: Vec<RecordBatch>,
    routes: Vec<Vec<Run>>,
    pending_rows: usize,
    pending_bytes: usize,
    /// Gathered batches per output partition, in memory.
    held: Vec<Vec<RecordBatch>>,
    held_bytes: usize,
    bytes: Vec<u64>,
    rows: Vec<u64>,
    reservation: MemoryReservation,
    spill: MapSpill,
    disk: Arc<DiskManager>,
    metrics: ExchangeMetrics,
}

impl MapWriter {
    fn new(
        schema: SchemaRef,
        partitions: usize,
        batch_size: usize,
        reservation: MemoryReservation,
        disk: Arc<DiskManager>,
        metrics: ExchangeMetrics,
    ) -> Self {
        MapWriter {
            schema,
            batch_size: batch_size.max(1),
            staged: Vec::new(),
            staged_ids: Vec::new(),
            pending: Vec::new(),
            routes: vec![Vec::new(); partitions],
            pending_rows: 0,
            pending_bytes: 0,
            held: vec![Vec::new(); partitions],
            held_bytes: 0,
            bytes: vec![0; partitions],
            rows: vec![0; partitions],
            reservation,
            spill: MapSpill::default(),
            disk,
            metrics,
        }
    }

    /// Takes `batch`, whose row `i` goes to partition `ids[i]` (all to partition 0 without ids).
    /// Routed batches are staged until their rows average [`ROWS_PER_RUN`] per partition, then
    /// reordered by partition together (a counting sort and one interleave, while they are in
    /// cache), so that each partition's rows of them are one run that the gather copies whole:
    /// at 200 partitions one batch alone would leave runs of 40 rows, each a copy of its own.
    fn push(&mut self, batch: RecordBatch, ids: Option<&[u32]>) -> Result<()> {
        self.metrics.rows.add(batch.num_rows());
        self.pending_bytes += batch.get_array_memory_size();
        match ids {
            Some(ids) => {
                self.staged_ids.extend_from_slice(ids);
                self.staged.push(batch);
                if self.staged_ids.len() >= self.routes.len() * ROWS_PER_RUN {
                    self.route_staged()?;
                }
            }
            None => {
                let index = self.pending.len() as u32;
                self.routes[0].push(Run { batch: index, start: 0, end: batch.num_rows() as u32 });
                self.pending_rows += batch.num_rows();
                self.pending.push(batch);
            }
        }
        if self.pending_rows >= self.routes.len() * self.batch_size {
            self.gather()?;
        }
        Ok(())
    }

    /// The staged batches as one pending batch ordered by partition, with each partition's run.
    fn route_staged(&mut self) -> Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let index = self.pending.len() as u32;
        let mut starts = vec![0u32; self.routes.len() + 1];
        for id in &self.staged_ids {
            starts[*id as usize + 1] += 1;
        }
        for partition in 0..self.routes.len() {
            starts[partition + 1] += starts[partition];
            if starts[partition + 1] > starts[partition] {
                self.routes[partition].push(Run { batch: index, start: starts[partition], end: starts[partition + 1] });
            }
        }
        let mut order = vec![(0usize, 0usize); self.staged_ids.len()];
        let rows = self.staged.iter().enumerate().flat_map(|(b, batch)| (0..batch.num_rows()).map(move |r| (b, r)));
        for (source, id) in rows.zip(&self.staged_ids) {
            let slot = &mut starts[*id as usize];
            order[*slot as usize] = source;
            *slot += 1;
        }
        let sources: Vec<&RecordBatch> = self.staged.iter().collect();
        let routed = interleave_record_batch(&sources, &order)?;
        let staged_bytes: usize = self.staged.iter().map(RecordBatch::get_array_memory_size).sum();
        self.pending_bytes = self.pending_bytes - staged_bytes + routed.get_array_memory_size();
        self.pending_rows += routed.num_rows();
        self.pending.push(routed);
        self.staged.clear();
        self.staged_ids.clear();
        Ok(())
    }

    /// Gathers the pending rows into batches of at most `batch_size` rows per partition, copying
    /// each partition's runs column by column.
    fn gather(&mut self) -> Result<()> {
        self.route_staged()?;
        if self.pending.is_empty() {
            return Ok(());
        }
        let columns: Vec<Vec<ArrayData>> = (0..self.schema.fields().len())
            .map(|column| self.pending.iter().map(|batch| batch.column(column).to_data()).collect())
            .collect();
        for (partition, route) in self.routes.iter_mut().enumerate() {
            for chunk in chunks_of_rows(route, self.batch_size) {
                let rows = chunk.iter().map(Run::len).sum::<u32>() as usize;
                let arrays = columns
                    .iter()
                    .map(|sources| {
                        let mut array = MutableArrayData::new(sources.iter().collect(), false, rows);
                        for run in &chunk {
                            array.try_extend(run.batch as usize, run.start as usize, run.end as usize)?;
                        }
                        Ok(make_array(array.freeze()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let options = RecordBatchOptions::new().with_row_count(Some(rows));
                let batch = RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)?;
                let size = batch.get_array_memory_size();
                self.metrics.bytes.add(size);
                self.bytes[partition] += size as u64;
                self.rows[partition] += rows as u64;
                self.held_bytes += size;
                self.held[partition].push(batch);
            }
            route.clear();
        }
        self.pending.clear();
        self.pending_rows = 0;
        self.pending_bytes = 0;
        Ok(())
    }

    /// Holds what the task has against the memory pool, or spills it when the pool says no.
    async fn reserve_or_spill(&mut self) -> Result<()> {
        let routes: usize = self.routes.iter().map(|r| r.capacity() * mem::size_of::<Run>()).sum();
        if self.reservation.try_resize(self.held_bytes + self.pending_bytes + routes).is_err() {
            self.spill().await?;
        }
        Ok(())
    }

    /// Appends everything the task holds, partition by partition, as one run to its spill file.
    async fn spill(&mut self) -> Result<()> {
        self.gather()?;
        let run = mem::replace(&mut self.held, vec![Vec::new(); self.routes.len()]);
        self.metrics.spills.add(1);
        self.metrics.spilled_bytes.add(mem::take(&mut self.held_bytes));
        self.spill.append(run, Arc::clone(&self.schema), &self.disk, &self.metrics).await?;
        self.reservation.free();
        Ok(())
    }

    async fn finish(mut self) -> Result<MapOutput> {
        self.gather()?;
        if self.reservation.try_resize(self.held_bytes).is_err() {
            self.spill().await?;
        }
        let spilled = mem::take(&mut self.spill).into_parts(self.routes.len());
        let parts = self
            .held
            .into_iter()
            .zip(spilled)
            .map(|(batches, spilled)| {
                let size = batches.iter().map(RecordBatch::get_array_memory_size).sum();
                MapPart { batches: batches.into(), reservation: self.reservation.split(size), spilled }
            })
            .collect();
        Ok(MapOutput { parts, bytes: self.bytes, rows: self.rows })
    }
}
