//! Spark's `AQEShuffleReadExec`: reads a finished shuffle stage by the partition specs adaptive
//! execution chose instead of partition by partition — small partitions coalesced, skewed ones
//! split by map ranges, or each map task's output read where it is (a local read).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
};
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::downcast_plan::downcast_plan;
use super::query_stage::ShuffleQueryStageExec;
use super::shuffle_exchange::ShuffleReadSpec;

/// What one partition of an adaptive read gets of a shuffle stage's output (Spark's
/// `ShufflePartitionSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ShufflePartitionSpec {
    /// Whole partitions, several small ones coalesced (`CoalescedPartitionSpec`); empty when
    /// the stage has no output at all.
    Coalesced(Range<usize>),
    /// One partition from the map tasks `maps` only: a piece of a skewed partition
    /// (`PartialReducerPartitionSpec`).
    PartialReducer { partition: usize, maps: Range<usize> },
    /// Some partitions of one map task: a local read (`PartialMapperPartitionSpec`).
    PartialMapper { map: usize, partitions: Range<usize> },
    /// Every partition of the map tasks `maps`: a local read with fewer tasks than map tasks
    /// (`CoalescedMapperPartitionSpec`).
    CoalescedMapper(Range<usize>),
}

impl ShufflePartitionSpec {
    /// `CoalescedPartitionSpec` of more than one partition.
    pub fn is_coalesced(&self) -> bool {
        matches!(self, ShufflePartitionSpec::Coalesced(range) if range.len() > 1)
    }

    pub fn is_local(&self) -> bool {
        matches!(self, ShufflePartitionSpec::PartialMapper { .. } | ShufflePartitionSpec::CoalescedMapper(_))
    }
}

/// Reads a [`ShuffleQueryStageExec`] by `specs`: output partition `i` is `specs[i]`.
///
/// A spec that appears more than once (a partition the other side of a skewed join split in
/// pieces, read once per piece) is read from the stage once, held against the memory pool,
/// and handed to each of its reads, because each part of a stage's output can be read once.
pub struct AqeShuffleReadExec {
    stage: Arc<ShuffleQueryStageExec>,
    child: Arc<dyn ExecutionPlan>,
    specs: Vec<ShufflePartitionSpec>,
    /// Specs read by several output partitions, and their shared read once started.
    repeated: Mutex<HashMap<ShufflePartitionSpec, SharedRead>>,
    metrics: ExecutionPlanMetricsSet,
    properties: Arc<PlanProperties>,
}

/// The batches of one spec read by several output partitions; the memory they hold goes back
/// to the pool with the last of them.
type SharedRead = Shared<BoxFuture<'static, std::result::Result<Arc<HeldBatches>, Arc<DataFusionError>>>>;

struct HeldBatches {
    batches: Vec<RecordBatch>,
    _reservation: MemoryReservation,
}

impl fmt::Debug for AqeShuffleReadExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AqeShuffleReadExec").field("specs", &self.specs).finish()
    }
}

impl AqeShuffleReadExec {
    /// `stage` must be a [`ShuffleQueryStageExec`].
    pub fn try_new(stage: Arc<dyn ExecutionPlan>, specs: Vec<ShufflePartitionSpec>) -> Result<Self> {
        let shuffle_stage = downcast_plan::<ShuffleQueryStageExec>(&stage).ok_or_else(|| {
            DataFusionError::Internal(format!("AQEShuffleRead reads a shuffle stage, not {}", stage.name()))
        })?;
        let partitioning = output_partitioning(&shuffle_stage, &specs);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(stage.schema()),
            partitioning,
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(AqeShuffleReadExec {
            stage: shuffle_stage,
            child: stage,
            specs,
            repeated: Mutex::default(),
            metrics: ExecutionPlanMetricsSet::new(),
            properties: Arc::new(properties),
        })
    }

    pub fn stage(&self) -> &ShuffleQueryStageExec {
        &self.stage
    }

    /// The stage read, as the plan node it is.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.child
    }

    pub fn specs(&self) -> &[ShufflePartitionSpec] {
        &self.specs
    }

    pub fn is_local(&self) -> bool {
        self.specs.iter().any(ShufflePartitionSpec::is_local)
    }

    /// The shuffle partitions output partition `partition` reads whole, where it coalesces
    /// several that no other output partition reads.
    pub fn coalesced_range(&self, partition: usize) -> Option<Range<usize>> {
        let spec = self.specs.get(partition).filter(|s| s.is_coalesced())?;
        let ShufflePartitionSpec::Coalesced(range) = spec else { return None };
        (self.specs.iter().filter(|s| *s == spec).count() == 1).then(|| range.clone())
    }

    /// Shuffle partition `shuffle_partition` alone, one of those output partition `partition`
    /// coalesces, whose rows it counts.
    pub fn execute_shuffle_partition(
        &self,
        partition: usize,
        shuffle_partition: usize,
        context: &Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let read = ShuffleReadSpec::Partitions(shuffle_partition..shuffle_partition + 1);
        let counted = self.stage.read(read, Arc::clone(context))?.inspect_ok(move |b| output_rows.add(b.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), counted)))
    }

    pub fn has_coalesced(&self) -> bool {
        self.specs.iter().any(ShufflePartitionSpec::is_coalesced)
    }

    pub fn has_skewed(&self) -> bool {
        self.specs.iter().any(|s| matches!(s, ShufflePartitionSpec::PartialReducer { .. }))
    }

    /// Spark's description of the read: `local`, `coalesced`, `skewed`, both, or nothing.
    pub fn kind(&self) -> &'static str {
        match (self.is_local(), self.has_coalesced(), self.has_skewed()) {
            (true, _, _) => "local",
            (false, true, true) => "coalesced and skewed",
            (false, true, false) => "coalesced",
            (false, false, true) => "skewed",
            (false, false, false) => "",
        }
    }

    /// The stage's reads that make up `spec`.
    fn reads(&self, spec: &ShufflePartitionSpec) -> Vec<ShuffleReadSpec> {
        match spec {
            ShufflePartitionSpec::Coalesced(range) => vec![ShuffleReadSpec::Partitions(range.clone())],
            ShufflePartitionSpec::PartialReducer { partition, maps } => {
                vec![ShuffleReadSpec::PartialReducer { partition: *partition, maps: maps.clone() }]
            }
            ShufflePartitionSpec::PartialMapper { map, partitions } => {
                vec![ShuffleReadSpec::PartialMapper { map: *map, partitions: partitions.clone() }]
            }
            ShufflePartitionSpec::CoalescedMapper(maps) => {
                let partitions = self.stage.statistics().partition_count();
                maps.clone().map(|map| ShuffleReadSpec::PartialMapper { map, partitions: 0..partitions }).collect()
            }
        }
    }

    fn read(&self, spec: &ShufflePartitionSpec, context: &Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let streams = self
            .reads(spec)
            .into_iter()
            .map(|read| self.stage.read(read, Arc::clone(context)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), futures::stream::iter(streams).flatten())))
    }

    /// The shared read of a spec that several output partitions read.
    fn shared_read(&self, spec: &ShufflePartitionSpec, context: &Arc<TaskContext>) -> Result<SharedRead> {
        let mut repeated = self.repeated.lock();
        if let Some(read) = repeated.get(spec) {
            return Ok(read.clone());
        }
        let mut stream = self.read(spec, context)?;
        let reservation = MemoryConsumer::new("AQEShuffleRead").register(context.memory_pool());
        let read = async move {
            let mut batches = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                reservation.try_grow(batch.get_array_memory_size())?;
                batches.push(batch);
            }
            Ok(Arc::new(HeldBatches { batches, _reservation: reservation }))
        }
        .map(|read: Result<_>| read.map_err(Arc::new))
        .boxed()
        .shared();
        repeated.insert(spec.clone(), read.clone());
        Ok(read)
    }
}

/// Coalescing whole partitions keeps every key in one partition, so a hash partitioning holds
/// with fewer partitions; a local read of one whole map task per partition is partitioned as
/// the exchange's input was; anything else (pieces of partitions, partitions read twice) is not
/// partitioned by anything.
fn output_partitioning(stage: &ShuffleQueryStageExec, specs: &[ShufflePartitionSpec]) -> Partitioning {
    let whole_partitions_in_order = specs.iter().all(|s| matches!(s, ShufflePartitionSpec::Coalesced(_)))
        && specs.windows(2).all(|pair| match pair {
            [ShufflePartitionSpec::Coalesced(a), ShufflePartitionSpec::Coalesced(b)] => a.end <= b.start,
            _ => false,
        });
    let partitions = stage.statistics().partition_count();
    let one_map_each = !specs.is_empty()
        && specs.iter().enumerate().all(|(i, s)| {
            matches!(s, ShufflePartitionSpec::PartialMapper { map, partitions: range } if *map == i && *range == (0..partitions))
        })
        && specs.len() == stage.statistics().map_count();
    match stage.properties().output_partitioning() {
        Partitioning::Hash(exprs, _) if whole_partitions_in_order => Partitioning::Hash(exprs.clone(), specs.len()),
        _ if one_map_each => stage.exchange().input().output_partitioning().clone(),
        _ => Partitioning::UnknownPartitioning(specs.len()),
    }
}

impl DisplayAs for AqeShuffleReadExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AQEShuffleReadExec: {} ({} partitions)", self.kind(), self.specs.len())
    }
}

impl ExecutionPlan for AqeShuffleReadExec {
    fn name(&self) -> &str {
        "AQEShuffleReadExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
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

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match children.pop() {
            Some(child) if children.is_empty() => Ok(Arc::new(AqeShuffleReadExec::try_new(child, self.specs.clone())?)),
            _ => Err(DataFusionError::Internal("AQEShuffleRead has one child".into())),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let spec = self.specs.get(partition).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "AQEShuffleRead has {} partitions, not {}",
                self.specs.len(),
                partition + 1
            ))
        })?;
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let stream: SendableRecordBatchStream = if self.specs.iter().filter(|s| *s == spec).count() > 1 {
            let read = self.shared_read(spec, &context)?;
            let batches = futures::stream::once(async move {
                let held = read.await.map_err(|e| DataFusionError::from(&e))?;
                let batches: Vec<Result<RecordBatch>> = held.batches.iter().cloned().map(Ok).collect();
                Ok::<_, DataFusionError>(futures::stream::iter(batches))
            })
            .try_flatten();
            Box::pin(RecordBatchStreamAdapter::new(self.schema(), batches))
        } else {
            self.read(spec, &context)?
        };
        let counted = stream.inspect_ok(move |batch| output_rows.add(batch.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), counted)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
