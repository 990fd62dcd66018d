//! Spark's `ShuffleExchangeExec`: moves rows between partitions so a parent's required
//! distribution holds.
//!
//! `hashpartitioning(keys, n)` sends each row to partition `pmod(murmur3(keys), n)`, the
//! function Spark uses for shuffles and bucket files alike, so a shuffled side lines up row
//! for row with a bucketed side. (DataFusion's `RepartitionExec` hashes with its own
//! function and must never meet a bucketed input.) `SinglePartition` gathers every row into
//! one partition. Every input partition is read by its own task, so all cores work.
//! Where we differ from Spark: the exchange is pipelined through in-memory channels rather
//! than written to shuffle files; rows waiting for their consumer are held against the
//! query memory pool, and past it are spilled to local disk (Arrow IPC) until read.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::runtime::SpawnedTask;
use datafusion::error::{DataFusionError, Result};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::execution::disk_manager::DiskManager;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, SpillFile, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties};
use futures::StreamExt;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::storage::bucket_hash::bucket_ids;

/// How rows are distributed over the output partitions.
#[derive(Debug, Clone)]
pub enum ExchangePartitioning {
    /// Spark's `HashPartitioning`: `pmod(murmur3(keys), n)`.
    Hash(Vec<Arc<dyn PhysicalExpr>>, usize),
    /// Spark's `SinglePartition`.
    Single,
}

impl ExchangePartitioning {
    pub fn partition_count(&self) -> usize {
        match self {
            ExchangePartitioning::Hash(_, n) => *n,
            ExchangePartitioning::Single => 1,
        }
    }
}

/// Rows on their way to one output partition: in memory, or spilled to a local file.
enum Routed {
    InMemory(RecordBatch, usize),
    Spilled(Arc<dyn SpillFile>),
}

type Channels = Vec<Option<UnboundedReceiver<Result<Routed>>>>;

/// Memory the rows in flight may take, where the rest go, and what moved.
struct Budget {
    reservation: Mutex<MemoryReservation>,
    disk: Arc<DiskManager>,
    rows: Count,
    bytes: Count,
    spills: Count,
    spilled_bytes: Count,
}

impl Budget {
    fn admit(&self, batch: RecordBatch) -> Result<Routed> {
        let size = batch.get_array_memory_size();
        let granted = self.reservation.lock().map_err(|_| poisoned())?.try_grow(size).is_ok();
        if granted {
            return Ok(Routed::InMemory(batch, size));
        }
        let file = self.disk.create_tmp_file("shuffle exchange")?;
        let path = file.path().ok_or_else(|| DataFusionError::Internal("spill file has no local path".into()))?;
        let mut writer = StreamWriter::try_new(std::fs::File::create(path)?, &batch.schema())?;
        writer.write(&batch)?;
        writer.finish()?;
        self.spills.add(1);
        self.spilled_bytes.add(size);
        Ok(Routed::Spilled(file))
    }

    fn release(&self, size: usize) -> Result<()> {
        self.reservation.lock().map_err(|_| poisoned())?.shrink(size);
        Ok(())
    }
}

fn poisoned() -> DataFusionError {
    DataFusionError::Internal("exchange lock poisoned".into())
}

/// Batches of one output partition, reading spilled files back as they come.
struct Delivery {
    receiver: UnboundedReceiver<Result<Routed>>,
    budget: Arc<Budget>,
    read_back: VecDeque<RecordBatch>,
    _tasks: Arc<Vec<SpawnedTask<()>>>,
}

impl Delivery {
    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.read_back.pop_front() {
                return Some(Ok(batch));
            }
            match self.receiver.recv().await? {
                Err(e) => return Some(Err(e)),
                Ok(Routed::InMemory(batch, size)) => return Some(self.budget.release(size).map(|()| batch)),
                Ok(Routed::Spilled(file)) => {
                    if let Err(e) = self.read(file.as_ref()) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    fn read(&mut self, file: &dyn SpillFile) -> Result<()> {
        let path = file.path().ok_or_else(|| DataFusionError::Internal("spill file has no local path".into()))?;
        let reader = StreamReader::try_new(std::fs::File::open(path)?, None)?;
        for batch in reader {
            self.read_back.push_back(batch?);
        }
        Ok(())
    }
}

/// Started lazily by the first partition executed. The input tasks are owned by the output
/// streams together, so they run until every consumer is done, even after the plan itself
/// has been dropped.
#[derive(Default)]
struct ExchangeState {
    receivers: Option<Channels>,
    tasks: Arc<Vec<SpawnedTask<()>>>,
    budget: Option<Arc<Budget>>,
}

pub struct ShuffleExchangeExec {
    input: Arc<dyn ExecutionPlan>,
    partitioning: ExchangePartitioning,
    /// Why the planner put this exchange here, in words a user can act on.
    reason: Option<String>,
    state: Arc<Mutex<ExchangeState>>,
    metrics: ExecutionPlanMetricsSet,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for ShuffleExchangeExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShuffleExchangeExec").field("partitioning", &self.partitioning).finish()
    }
}

impl ShuffleExchangeExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, partitioning: ExchangePartitioning, reason: Option<String>) -> Self {
        let output = match &partitioning {
            ExchangePartitioning::Hash(exprs, n) => Partitioning::Hash(exprs.clone(), *n),
            ExchangePartitioning::Single => Partitioning::UnknownPartitioning(1),
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            output,
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        ShuffleExchangeExec {
            input,
            partitioning,
            reason,
            state: Arc::default(),
            metrics: ExecutionPlanMetricsSet::new(),
            properties: Arc::new(properties),
        }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    pub fn partitioning(&self) -> &ExchangePartitioning {
        &self.partitioning
    }

    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, ExchangeState>> {
        self.state.lock().map_err(|_| DataFusionError::Internal("exchange lock poisoned".into()))
    }

    fn start(&self, state: &mut ExchangeState, context: Arc<TaskContext>) -> Result<Channels> {
        let mut tasks = Vec::new();
        let budget = Arc::new(Budget {
            reservation: Mutex::new(MemoryConsumer::new("ShuffleExchange").with_can_spill(true).register(context.memory_pool())),
            disk: Arc::clone(&context.runtime_env().disk_manager),
            rows: MetricBuilder::new(&self.metrics).counter("shuffle_rows", 0),
            bytes: MetricBuilder::new(&self.metrics).counter("shuffle_bytes", 0),
            spills: MetricBuilder::new(&self.metrics).spill_count(0),
            spilled_bytes: MetricBuilder::new(&self.metrics).spilled_bytes(0),
        });
        state.budget = Some(Arc::clone(&budget));
        let outputs = self.partitioning.partition_count();
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..outputs).map(|_| unbounded_channel()).unzip();
        for partition in 0..self.input.output_partitioning().partition_count() {
            let input = Arc::clone(&self.input);
            let context = Arc::clone(&context);
            let senders = senders.clone();
            let partitioning = self.partitioning.clone();
            let budget = Arc::clone(&budget);
            tasks.push(SpawnedTask::spawn(async move {
                if let Err(e) = route(input, partition, context, &partitioning, &senders, &budget).await {
                    let shared = Arc::new(e);
                    for sender in &senders {
                        let _ = sender.send(Err(DataFusionError::Shared(Arc::clone(&shared))));
                    }
                }
            }));
        }
        state.tasks = Arc::new(tasks);
        Ok(receivers.into_iter().map(Some).collect())
    }
}

/// Reads one input partition and sends every row to its output partition.
async fn route(
    input: Arc<dyn ExecutionPlan>,
    partition: usize,
    context: Arc<TaskContext>,
    partitioning: &ExchangePartitioning,
    senders: &[UnboundedSender<Result<Routed>>],
    budget: &Budget,
) -> Result<()> {
    let mut stream = input.execute(partition, context)?;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        budget.rows.add(batch.num_rows());
        budget.bytes.add(batch.get_array_memory_size());
        match partitioning {
            ExchangePartitioning::Single => {
                let _ = senders[0].send(budget.admit(batch));
            }
            ExchangePartitioning::Hash(exprs, n) => {
                let keys = exprs
                    .iter()
                    .map(|e| e.evaluate(&batch)?.into_array(batch.num_rows()))
                    .collect::<Result<Vec<_>>>()?;
                let ids = bucket_ids(&keys, batch.num_rows(), *n as u32)?;
                let mut rows_of: Vec<Vec<u32>> = vec![Vec::new(); *n];
                for (row, id) in ids.iter().enumerate() {
                    rows_of[*id as usize].push(row as u32);
                }
                for (target, indices) in rows_of.into_iter().enumerate() {
                    if indices.is_empty() {
                        continue;
                    }
                    let part = take_record_batch(&batch, &UInt32Array::from(indices))?;
                    // A closed receiver means its consumer stopped early (e.g. a LIMIT).
                    let _ = senders[target].send(budget.admit(part));
                }
            }
        }
    }
    Ok(())
}

impl DisplayAs for ShuffleExchangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.partitioning {
            ExchangePartitioning::Hash(exprs, n) => {
                let keys: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
                write!(f, "ShuffleExchangeExec: hashpartitioning({}, {n})", keys.join(", "))
            }
            ExchangePartitioning::Single => write!(f, "ShuffleExchangeExec: SinglePartition"),
        }
    }
}

impl ExecutionPlan for ShuffleExchangeExec {
    fn name(&self) -> &str {
        "ShuffleExchangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        if let ExchangePartitioning::Hash(exprs, _) = &self.partitioning {
            for expr in exprs {
                if f(expr)? == TreeNodeRecursion::Stop {
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(ShuffleExchangeExec::new(children.swap_remove(0), self.partitioning.clone(), self.reason.clone())))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let (receiver, tasks, budget) = {
            let mut state = self.lock()?;
            if state.receivers.is_none() {
                let receivers = self.start(&mut state, context)?;
                state.receivers = Some(receivers);
            }
            let receiver = state.receivers.as_mut().and_then(|r| r.get_mut(partition)).and_then(Option::take).ok_or_else(|| {
                DataFusionError::Internal(format!("exchange partition {partition} executed twice or out of range"))
            })?;
            let budget = state.budget.clone().ok_or_else(|| DataFusionError::Internal("exchange not started".into()))?;
            (receiver, Arc::clone(&state.tasks), budget)
        };
        let delivery = Delivery { receiver, budget, read_back: VecDeque::new(), _tasks: tasks };
        let stream = futures::stream::unfold(delivery, |mut delivery| async move {
            delivery.next().await.map(|batch| (batch, delivery))
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::common::collect;
    use datafusion::physical_plan::test::TestMemoryExec;

    use super::*;

    fn input(rows: i64, partitions: usize) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batches: Vec<Vec<RecordBatch>> = (0..partitions as i64)
            .map(|p| {
                (0..10)
                    .map(|b| {
                        let start = (p * 10 + b) * rows;
                        let values: Int64Array = (start..start + rows).collect();
                        RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap()
                    })
                    .collect()
            })
            .collect();
        TestMemoryExec::try_new_exec(&batches, schema, None).unwrap()
    }

    #[tokio::test]
    async fn rows_reach_their_spark_partition_and_spill_past_the_budget() {
        let runtime = RuntimeEnvBuilder::new().with_memory_limit(64 * 1024, 1.0).build_arc().unwrap();
        let context = Arc::new(TaskContext::default().with_runtime(runtime));
        let exchange = ShuffleExchangeExec::new(
            input(1000, 2),
            ExchangePartitioning::Hash(vec![Arc::new(Column::new("k", 0))], 4),
            None,
        );
        let mut seen = 0;
        // Partition 0 is read to the end first, so rows for the others wait, over budget.
        for partition in 0..4 {
            let batches = collect(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.unwrap();
            for batch in batches {
                let ids = bucket_ids(&[Arc::clone(batch.column(0))], batch.num_rows(), 4).unwrap();
                assert!(ids.iter().all(|id| *id as usize == partition));
                seen += batch.num_rows();
            }
        }
        assert_eq!(seen, 20_000);
        let metrics = exchange.metrics().unwrap();
        assert!(metrics.spill_count().unwrap_or(0) > 0, "{metrics:?}");
        assert_eq!(context.memory_pool().reserved(), 0, "every reservation is released once read");
    }
}
