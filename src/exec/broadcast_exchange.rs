//! Spark's `BroadcastExchangeExec`: the build side of a broadcast join, collected once into a
//! single partition that every probe partition shares (DataFusion's `HashJoinExec` in
//! `CollectLeft` mode builds its hash table from it once and hands it to all probe tasks).
//! Read by more than one join (a `ReusedExchange`), it gathers its rows once, under a memory
//! reservation, and hands each reader the same batches; Spark shares the built relation too,
//! where each of our joins builds its own hash table from them.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, common};
use futures::StreamExt;
use tokio::sync::OnceCell;

/// The rows gathered for several readers, and the memory they hold.
type Gathered = std::result::Result<(Arc<Vec<RecordBatch>>, Arc<MemoryReservation>), Arc<DataFusionError>>;

#[derive(Debug)]
pub struct BroadcastExchangeExec {
    /// The build keys, as Spark's `HashedRelationBroadcastMode` prints them.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Built for a null-aware anti join, which Spark's broadcast mode records.
    null_aware: bool,
    gather: Arc<CoalescePartitionsExec>,
    /// Joins that read this exchange.
    readers: AtomicUsize,
    /// The gathered rows, once a first reader asked, when there are several readers.
    shared: Arc<OnceCell<Gathered>>,
}

impl BroadcastExchangeExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        BroadcastExchangeExec {
            keys,
            null_aware: false,
            gather: Arc::new(CoalescePartitionsExec::new(input)),
            readers: AtomicUsize::new(1),
            shared: Arc::new(OnceCell::new()),
        }
    }

    pub fn null_aware(self, null_aware: bool) -> Self {
        BroadcastExchangeExec { null_aware, ..self }
    }

    /// Counts one more join reading this exchange, before it runs.
    pub fn add_reader(&self) {
        self.readers.fetch_add(1, Ordering::Relaxed);
    }

    pub fn is_null_aware(&self) -> bool {
        self.null_aware
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        self.gather.input()
    }

    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }
}

impl DisplayAs for BroadcastExchangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "BroadcastExchangeExec: keys=[{}]", keys.join(", "))
    }
}

impl ExecutionPlan for BroadcastExchangeExec {
    fn name(&self) -> &str {
        "BroadcastExchangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.gather.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.gather.input()]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for key in &self.keys {
            if f(key)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(BroadcastExchangeExec::new(children.swap_remove(0), self.keys.clone()).null_aware(self.null_aware)))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if self.readers.load(Ordering::Relaxed) < 2 {
            return self.gather.execute(partition, context);
        }
        let (gather, shared) = (Arc::clone(&self.gather), Arc::clone(&self.shared));
        let batches = async move {
            let gathered = shared
                .get_or_init(|| async move {
                    let gathered: Result<_> = async move {
                        let reservation = MemoryConsumer::new("BroadcastExchange").register(context.memory_pool());
                        let batches = common::collect(gather.execute(partition, context)?).await?;
                        reservation.try_grow(batches.iter().map(RecordBatch::get_array_memory_size).sum())?;
                        Ok((Arc::new(batches), Arc::new(reservation)))
                    }
                    .await;
                    gathered.map_err(Arc::new)
                })
                .await
                .clone()
                .map_err(DataFusionError::Shared)?;
            let batches: Vec<Result<RecordBatch>> = gathered.0.iter().cloned().map(Ok).collect();
            Ok::<_, DataFusionError>(futures::stream::iter(batches))
        };
        let stream = futures::stream::once(batches).map(|batches| match batches {
            Ok(batches) => batches.left_stream(),
            Err(e) => futures::stream::iter([Err(e)]).right_stream(),
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream.flatten())))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.gather.metrics()
    }
}
