//! Spark's `ShuffleExchangeExec` itself: its map side runs once, started by whichever comes
//! first of a read and `materialize` (adaptive execution's query stage), and each part of its
//! output goes to as many reads as the exchange has readers: one, and one more for each
//! `ReusedExchange` of it. How it partitions, maps, spills and reads rows is in the files
//! beside it.

use std::fmt;
use std::sync::Arc;

use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
};
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, TryStreamExt};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::exchange_metrics::ExchangeMetrics;
use super::exchange_partitioning::ExchangePartitioning;
use super::map_output::{MapOutputs, buffer_map_task, route_map_task, run_map_task};
use super::range_bounds::{KeySample, RangeRouter, SortKeys, sample_size_per_map};
use super::reader::{PartsReader, ShuffleReadSpec};
use super::spill;
use super::statistics::MapOutputStatistics;

/// The map side's one run, awaited by every read and `materialize` alike. Whoever polls it
/// joins the map tasks; they stop when the last holder (the plan or a stream) is dropped.
type MapSide = Shared<BoxFuture<'static, std::result::Result<Arc<MapOutputs>, Arc<DataFusionError>>>>;

#[derive(Default)]
struct ExchangeState {
    /// Started by the first read or `materialize`.
    map_side: Option<MapSide>,
    /// How many reads each part (`map * partitions + partition`) has been handed.
    claimed: Vec<usize>,
    /// Reads each part gets: one, and one more for each `ReusedExchange` of this exchange.
    readers: usize,
}

pub struct ShuffleExchangeExec {
    input: Arc<dyn ExecutionPlan>,
    partitioning: ExchangePartitioning,
    /// Why the planner put this exchange here, in words a user can act on.
    reason: Option<String>,
    state: Mutex<ExchangeState>,
    /// Bounds the spill files open for reading at once (see `spill`).
    spill_reads: Arc<Semaphore>,
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
            // The bounds are known only once the map side has sampled its input.
            ExchangePartitioning::Range(_, n) => Partitioning::UnknownPartitioning(*n),
        };
        // Nothing comes out before the map side has read all of its input.
        let properties = PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            output,
            EmissionType::Final,
            Boundedness::Bounded,
        );
        ShuffleExchangeExec {
            input,
            partitioning,
            reason,
            state: Mutex::default(),
            spill_reads: Arc::new(Semaphore::new(spill::CONCURRENT_READS)),
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

    /// One more reader of every output partition (a `ReusedExchange`), before the map side runs.
    pub fn add_reader(&self) -> Result<()> {
        let mut state = self.state.lock();
        if state.map_side.is_some() {
            return Err(DataFusionError::Internal("an exchange that has run cannot be reused".into()));
        }
        state.readers = state.readers.max(1) + 1;
        Ok(())
    }

    /// Runs the map side to completion (once, however many callers) and returns what each map
    /// task produced for each output partition.
    pub async fn materialize(&self, context: Arc<TaskContext>) -> Result<Arc<MapOutputStatistics>> {
        let map_side = self.map_side(&mut self.state.lock(), context);
        let outputs = map_side.await.map_err(|e| DataFusionError::from(&e))?;
        Ok(outputs.statistics())
    }

    /// Streams the rows of `spec`, once the map side has run. Each part of the map output
    /// (one map task's rows for one partition) can be read once.
    pub fn read(&self, spec: ShuffleReadSpec, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let maps = self.input.output_partitioning().partition_count();
        let partitions = self.partitioning.partition_count();
        let parts = spec.parts(maps, partitions)?;
        let map_side = {
            let mut state = self.state.lock();
            if state.claimed.is_empty() {
                state.claimed = vec![0; maps * partitions];
            }
            let readers = state.readers.max(1);
            if let Some((map, partition)) = parts.iter().find(|(m, p)| state.claimed[m * partitions + p] >= readers) {
                return Err(DataFusionError::Internal(format!(
                    "exchange output of map task {map} for partition {partition} read twice"
                )));
            }
            for (map, partition) in &parts {
                state.claimed[map * partitions + partition] += 1;
            }
            self.map_side(&mut state, Arc::clone(&context))
        };
        let (schema, reads, batch_size) =
            (self.schema(), Arc::clone(&self.spill_reads), context.session_config().batch_size());
        let stream = futures::stream::once(async move {
            let outputs = map_side.await.map_err(|e| DataFusionError::from(&e))?;
            Ok::<_, DataFusionError>(PartsReader::new(outputs.take(&parts)?, schema, batch_size, reads).into_stream())
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }

    fn map_side(&self, state: &mut ExchangeState, context: Arc<TaskContext>) -> MapSide {
        let readers = state.readers.max(1);
        let start = || {
            let maps = self.input.output_partitioning().partition_count();
            let partitions = self.partitioning.partition_count();
            let metrics = ExchangeMetrics::new(&self.metrics);
            let (input, partitioning) = (Arc::clone(&self.input), self.partitioning.clone());
            let reads = Arc::clone(&self.spill_reads);
            let slots = context.session_config().target_partitions();
            async move {
                let outputs = match partitioning {
                    ExchangePartitioning::Range(ordering, n) => {
                        let keys = SortKeys::try_new(ordering, &input.schema())?;
                        let per_map = sample_size_per_map(n, maps);
                        let buffered = run_all(
                            (0..maps).map(|map| {
                                let sample = KeySample::new(keys.clone(), per_map, map);
                                buffer_map_task(
                                    Arc::clone(&input),
                                    map,
                                    Arc::clone(&context),
                                    sample,
                                    metrics.first_pass(),
                                )
                            }),
                            slots,
                        )
                        .await?;
                        let (buffered, samples): (Vec<_>, Vec<_>) = buffered.into_iter().unzip();
                        let router = RangeRouter::from_samples(samples, n, keys);
                        run_all(
                            buffered.into_iter().enumerate().map(|(map, output)| {
                                route_map_task(
                                    output,
                                    map,
                                    input.schema(),
                                    Arc::clone(&context),
                                    router.clone(),
                                    Arc::clone(&reads),
                                    metrics.clone(),
                                )
                            }),
                            slots,
                        )
                        .await?
                    }
                    partitioning => {
                        run_all(
                            (0..maps).map(|map| {
                                let (input, context) = (Arc::clone(&input), Arc::clone(&context));
                                run_map_task(input, map, context, partitioning.clone(), metrics.clone())
                            }),
                            slots,
                        )
                        .await?
                    }
                };
                Ok(Arc::new(MapOutputs::new(outputs, partitions, readers)))
            }
            .map(|run: Result<_>| run.map_err(Arc::new))
            .boxed()
            .shared()
        };
        state.map_side.get_or_insert_with(start).clone()
    }
}

/// Runs the map tasks, at most `slots` at a time, as Spark runs a stage's tasks in its
/// executor's slots; the first error drops (and so aborts) the others. Started all at once,
/// every task's sorts and aggregates would register with the memory pool together, each
/// granted a sliver of it, and would spill what fits in memory when they run a few at a time.
async fn run_all<T: Send + 'static>(
    tasks: impl Iterator<Item = impl std::future::Future<Output = Result<T>> + Send + 'static>,
    slots: usize,
) -> Result<Vec<T>> {
    let slots = Arc::new(Semaphore::new(slots.max(1)));
    let spawned = tasks.map(|task| {
        let slots = Arc::clone(&slots);
        SpawnedTask::spawn(async move {
            let _slot = slots.acquire_owned().await.map_err(|e| DataFusionError::External(Box::new(e)))?;
            task.await
        })
        .map(|joined| joined.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?)
    });
    futures::future::try_join_all(spawned).await
}

impl DisplayAs for ShuffleExchangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.partitioning {
            ExchangePartitioning::Hash(exprs, n) => {
                let keys: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
                write!(f, "ShuffleExchangeExec: hashpartitioning({}, {n})", keys.join(", "))
            }
            ExchangePartitioning::Single => write!(f, "ShuffleExchangeExec: SinglePartition"),
            ExchangePartitioning::Range(ordering, n) => {
                write!(f, "ShuffleExchangeExec: rangepartitioning({ordering}, {n})")
            }
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
        let exprs: Vec<&Arc<dyn PhysicalExpr>> = match &self.partitioning {
            ExchangePartitioning::Hash(exprs, _) => exprs.iter().collect(),
            ExchangePartitioning::Range(ordering, _) => ordering.iter().map(|e| &e.expr).collect(),
            ExchangePartitioning::Single => Vec::new(),
        };
        for expr in exprs {
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
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
        self.read(ShuffleReadSpec::Partitions(partition..partition + 1), context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
