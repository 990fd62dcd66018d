//! Spark's `ShuffleQueryStageExec` and `BroadcastQueryStageExec`: an exchange whose input has
//! run to completion under adaptive execution, with what it produced — the figures the rest
//! of the plan is re-planned with.
//!
//! A stage shows its exchange as its only child, so that walks over the plan (EXPLAIN, the
//! metrics of EXPLAIN ANALYZE, the benchmark's exchange count) see what ran; the plan above
//! it must not change what lies below, so a stage refuses new children.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::reused_exchange::ReusedExchangeExec;
use super::shuffle_exchange::{MapOutputStatistics, ShuffleExchangeExec, ShuffleReadSpec};

/// The metric of a stage that read its twin's output: the twin's stage id.
pub const TWIN_STAGE_READ: &str = "twin_stage_read";

fn refuse_new_children(
    name: &str,
    current: &Arc<dyn ExecutionPlan>,
    children: &[Arc<dyn ExecutionPlan>],
) -> Result<()> {
    match children {
        [child] if Arc::ptr_eq(child, current) => Ok(()),
        _ => Err(DataFusionError::Internal(format!("{name} has run: what lies below it cannot change"))),
    }
}

/// A shuffle exchange whose map side has run: its output is read by partition, or by the
/// partition specs of an `AQEShuffleRead` above it.
pub struct ShuffleQueryStageExec {
    id: usize,
    exchange: Arc<ShuffleExchangeExec>,
    /// The exchange again, as the plan node it is; for a stage that read its twin's output,
    /// its own exchange, which did not run.
    child: Arc<dyn ExecutionPlan>,
    statistics: Arc<MapOutputStatistics>,
    /// The stage whose exchange's output this one read instead of running its own.
    twin_stage: Option<usize>,
}

impl fmt::Debug for ShuffleQueryStageExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShuffleQueryStageExec").field("id", &self.id).finish()
    }
}

impl ShuffleQueryStageExec {
    /// Runs the map side of `exchange` to completion and wraps it as stage `id`.
    pub async fn materialize(id: usize, exchange: Arc<ShuffleExchangeExec>, context: Arc<TaskContext>) -> Result<Self> {
        let statistics = exchange.materialize(context).await?;
        let child: Arc<dyn ExecutionPlan> = Arc::clone(&exchange) as Arc<dyn ExecutionPlan>;
        Ok(ShuffleQueryStageExec { id, exchange, child, statistics, twin_stage: None })
    }

    /// Stage `id` reading another stage's exchange (Spark's stage over a `ReusedExchange`),
    /// once that exchange's map side has run.
    pub async fn reuse(id: usize, reused: Arc<ReusedExchangeExec>, context: Arc<TaskContext>) -> Result<Self> {
        let (exchange, statistics) = run_shuffle(&reused, context).await?;
        Ok(ShuffleQueryStageExec { id, exchange, child: reused, statistics, twin_stage: None })
    }

    /// Stage `id` of `own`, which does not run: the stage reads the output of `twin`, stage
    /// `twin_stage`'s exchange, whose rows are the same (`read_twin_exchanges`), once it has
    /// run, and shows `own`.
    pub async fn read_twin(
        id: usize,
        own: Arc<ShuffleExchangeExec>,
        (twin_stage, twin): (usize, Arc<ReusedExchangeExec>),
        context: Arc<TaskContext>,
    ) -> Result<Self> {
        let (exchange, statistics) = run_shuffle(&twin, context).await?;
        Ok(ShuffleQueryStageExec { id, exchange, child: own, statistics, twin_stage: Some(twin_stage) })
    }

    /// Stage `id` of `exchange` as if its map tasks had written `bytes[map][partition]`, for
    /// tests of the rules that read a stage's figures; its rows cannot be read.
    #[cfg(test)]
    pub(crate) fn with_statistics(id: usize, exchange: Arc<ShuffleExchangeExec>, bytes: Vec<Vec<u64>>) -> Self {
        let partitions = exchange.partitioning().partition_count();
        let statistics = Arc::new(MapOutputStatistics::of_bytes(bytes, partitions));
        let child: Arc<dyn ExecutionPlan> = Arc::clone(&exchange) as Arc<dyn ExecutionPlan>;
        ShuffleQueryStageExec { id, exchange, child, statistics, twin_stage: None }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn exchange(&self) -> &ShuffleExchangeExec {
        &self.exchange
    }

    /// The exchange that ran, as the plan node it is, or for a stage that read its twin's
    /// output, its own exchange, which did not.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.child
    }

    /// What each map task wrote to each partition.
    pub fn statistics(&self) -> &MapOutputStatistics {
        &self.statistics
    }

    /// Streams the rows of `spec` (each part of the output can be read once), under the
    /// stage's own schema where it read a twin's output (their columns' nullability may
    /// differ, never their values).
    pub fn read(&self, spec: ShuffleReadSpec, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let rows = self.exchange.read(spec, context)?;
        if self.twin_stage.is_none() {
            return Ok(rows);
        }
        let schema = self.child.schema();
        let own = Arc::clone(&schema);
        let relabelled = rows.map(move |batch| {
            let batch = batch?;
            let rows = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            Ok(RecordBatch::try_new_with_options(Arc::clone(&own), batch.columns().to_vec(), &rows)?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, relabelled)))
    }
}

/// The shuffle exchange `reused` reads, once its map side has run, and what that wrote.
async fn run_shuffle(
    reused: &ReusedExchangeExec,
    context: Arc<TaskContext>,
) -> Result<(Arc<ShuffleExchangeExec>, Arc<MapOutputStatistics>)> {
    let exchange = Arc::clone(
        reused.shuffle().ok_or_else(|| DataFusionError::Internal("a shuffle stage reads a shuffle".into()))?,
    );
    let statistics = exchange.materialize(context).await?;
    Ok((exchange, statistics))
}

impl DisplayAs for ShuffleQueryStageExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ShuffleQueryStageExec: {}", self.id)
    }
}

impl ExecutionPlan for ShuffleQueryStageExec {
    fn name(&self) -> &str {
        "ShuffleQueryStageExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.child.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.child]
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let twin_stage = self.twin_stage?;
        let metrics = ExecutionPlanMetricsSet::new();
        MetricBuilder::new(&metrics).global_counter(TWIN_STAGE_READ).add(twin_stage);
        Some(metrics.clone_inner())
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        refuse_new_children("ShuffleQueryStage", &self.child, &children)?;
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        self.read(ShuffleReadSpec::Partitions(partition..partition + 1), context)
    }
}

/// The rows a broadcast exchange gathered, held against the memory pool until the join that
/// builds from them takes them.
struct Broadcast {
    batches: Vec<RecordBatch>,
    reservation: MemoryReservation,
}

/// A broadcast exchange whose rows have been gathered: the build side of a broadcast join.
pub struct BroadcastQueryStageExec {
    id: usize,
    child: Arc<dyn ExecutionPlan>,
    rows: u64,
    bytes: u64,
    /// Taken by the one read of the join that builds from it.
    broadcast: Mutex<Option<Broadcast>>,
}

impl fmt::Debug for BroadcastQueryStageExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BroadcastQueryStageExec").field("id", &self.id).finish()
    }
}

impl BroadcastQueryStageExec {
    /// Gathers the rows of `exchange` (a `BroadcastExchange`, or a `ReusedExchange` of one)
    /// and wraps them as stage `id`.
    pub async fn materialize(id: usize, exchange: Arc<dyn ExecutionPlan>, context: Arc<TaskContext>) -> Result<Self> {
        if !ReusedExchangeExec::gathers_broadcast(exchange.as_ref()) {
            return Err(DataFusionError::Internal(format!(
                "a broadcast stage needs a broadcast exchange, not {}",
                exchange.name()
            )));
        }
        let reservation = MemoryConsumer::new(format!("BroadcastQueryStage[{id}]")).register(context.memory_pool());
        let mut stream = exchange.execute(0, context)?;
        let mut batches = Vec::new();
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            reservation.try_grow(batch.get_array_memory_size())?;
            batches.push(batch);
        }
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let bytes = reservation.size() as u64;
        Ok(BroadcastQueryStageExec {
            id,
            child: exchange,
            rows,
            bytes,
            broadcast: Mutex::new(Some(Broadcast { batches, reservation })),
        })
    }

    pub fn id(&self) -> usize {
        self.id
    }

    /// The broadcast exchange that ran.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.child
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Arrow memory size of the gathered rows.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl DisplayAs for BroadcastQueryStageExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "BroadcastQueryStageExec: {}", self.id)
    }
}

impl ExecutionPlan for BroadcastQueryStageExec {
    fn name(&self) -> &str {
        "BroadcastQueryStageExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.child.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.child]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        refuse_new_children("BroadcastQueryStage", &self.child, &children)?;
        Ok(self)
    }

    /// The gathered rows, once: the memory they hold goes back to the pool as the join that
    /// builds from them drops them.
    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let broadcast = match (partition, self.broadcast.lock().take()) {
            (0, Some(broadcast)) => broadcast,
            _ => return Err(DataFusionError::Internal(format!("broadcast stage {} read twice", self.id))),
        };
        let Broadcast { batches, reservation } = broadcast;
        let stream = futures::stream::iter(batches.into_iter().map(Ok)).inspect_ok(move |_| {
            let _ = &reservation;
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }
}
