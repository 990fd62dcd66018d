//! Spark's join operators (`SortMergeJoin`, `ShuffledHashJoin`, `BroadcastHashJoin`,
//! `BroadcastNestedLoopJoin`, `CartesianProduct`) as one node that keeps Spark's view —
//! left and right as written, the build side, the join type — and runs on DataFusion's join
//! implementations.
//!
//! DataFusion's hash and nested-loop joins always build their left input, so a Spark
//! `BuildRight` join runs as DataFusion's join with the inputs swapped and a projection that
//! restores the column order. The children seen by the planner and EXPLAIN are always
//! Spark's (left, right); the DataFusion join is rebuilt from them whenever they change. An
//! inner sort-merge join on one integral key with no condition, and a semi or anti one on
//! one integral key, run on our own merge loops (`merge_join`, `merge_semi_join`) instead.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::JoinType;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode, SortMergeJoinExec,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties};
use futures::StreamExt;

use super::join_spec::{BuildSide, JoinSpec, JoinStrategy};
use super::merge_join;
use super::merge_semi_join::{Existence, merge_semi_join};
use super::null_aware_anti_join::NullAwareAntiJoinExec;
use super::query_stage::BroadcastQueryStageExec;
use super::reused_exchange::ReusedExchangeExec;

#[derive(Debug, Clone)]
pub struct SparkJoinExec {
    spec: JoinSpec,
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    inner: Arc<dyn ExecutionPlan>,
    /// Whether the join runs on our merge loops (`merge_join`, `merge_semi_join`) rather than
    /// `inner`, which still gives the plan's properties.
    merges: bool,
    /// Set when it joins the shuffle partitions of its coalesced partitions one by one
    /// ([`Self::taken_apart`]).
    apart: Option<Apart>,
    metrics: ExecutionPlanMetricsSet,
}

impl SparkJoinExec {
    /// `left` and `right` as Spark sees them; for a broadcast join the build child must
    /// already be a `BroadcastExchangeExec` (or, under adaptive execution, its stage).
    pub fn try_new(spec: JoinSpec, left: Arc<dyn ExecutionPlan>, right: Arc<dyn ExecutionPlan>) -> Result<Self> {
        let inner = build(&spec, Arc::clone(&left), Arc::clone(&right))?;
        let merges = merge_join::applies(&spec, &left.schema(), &right.schema());
        Ok(SparkJoinExec { spec, left, right, inner, merges, apart: None, metrics: ExecutionPlanMetricsSet::new() })
    }

    /// Whether this join can sort and join each shuffle partition of its coalesced reads on
    /// its own (`apart::joining_shuffle_partitions_apart`): a join on our merge loops, not
    /// already taken apart, with no skewed partition split.
    pub fn can_be_taken_apart(&self) -> bool {
        self.merges && !self.spec.skew && self.apart.is_none()
    }

    /// This join taken apart over `left` and `right`, whose partition `i` each give shuffle
    /// partition `i`'s rows in key order, coalesced as `ranges` says. Its output is in key
    /// order only within each shuffle partition, so it declares no order.
    pub fn taken_apart(
        &self,
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        ranges: Arc<[Range<usize>]>,
    ) -> SparkJoinExec {
        let inner = self.inner.properties();
        // The keys stay equal and the partitioning stays the keys'; only the order goes.
        let mut equivalences = inner.equivalence_properties().clone();
        equivalences.clear_orderings();
        let unordered = PlanProperties::new(
            equivalences,
            inner.output_partitioning().clone(),
            inner.emission_type,
            inner.boundedness,
        );
        SparkJoinExec {
            spec: self.spec.clone(),
            left,
            right,
            inner: Arc::clone(&self.inner),
            merges: true,
            apart: Some(Apart { properties: Arc::new(unordered), ranges }),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The coalesced ranges of shuffle partitions a join taken apart joins one by one.
    pub fn apart_ranges(&self) -> Option<&Arc<[Range<usize>]>> {
        self.apart.as_ref().map(|apart| &apart.ranges)
    }

    /// The join of shuffle partition `shuffle_partition` alone, one of those output partition
    /// `partition` coalesces, where this join takes them apart: its rows in key order.
    pub fn join_shuffle_partition(
        &self,
        partition: usize,
        shuffle_partition: usize,
        context: &Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        MetricBuilder::new(&self.metrics).counter(SHUFFLE_PARTITIONS_APART, partition).add(1);
        Ok(merged(
            &self.spec,
            (
                self.left.execute(shuffle_partition, Arc::clone(context))?,
                self.right.execute(shuffle_partition, Arc::clone(context))?,
            ),
            self.schema(),
            context.session_config().batch_size(),
            (&self.metrics, partition),
            context.memory_pool(),
        ))
    }

    /// This join with its condition evaluated by `filter`.
    pub fn with_filter(&self, filter: JoinFilter) -> Result<SparkJoinExec> {
        let spec = JoinSpec { filter: Some(filter), ..self.spec.clone() };
        let join = SparkJoinExec::try_new(spec, Arc::clone(&self.left), Arc::clone(&self.right))?;
        Ok(SparkJoinExec { apart: self.apart.clone(), ..join })
    }

    pub fn spec(&self) -> &JoinSpec {
        &self.spec
    }

    pub fn left(&self) -> &Arc<dyn ExecutionPlan> {
        &self.left
    }

    pub fn right(&self) -> &Arc<dyn ExecutionPlan> {
        &self.right
    }

    pub fn left_keys(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.spec.on.iter().map(|(l, _)| Arc::clone(l)).collect()
    }

    pub fn right_keys(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.spec.on.iter().map(|(_, r)| Arc::clone(r)).collect()
    }
}

fn build(
    spec: &JoinSpec,
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let hash_join = |left, right, mode| {
        HashJoinExec::try_new(
            left,
            right,
            spec.on.clone(),
            spec.filter.clone(),
            &spec.join_type,
            None,
            mode,
            spec.null_equality,
            false,
        )
    };
    let requires_broadcast = |child: &Arc<dyn ExecutionPlan>| -> Result<()> {
        if ReusedExchangeExec::gathers_broadcast(child.as_ref()) || child.is::<BroadcastQueryStageExec>() {
            Ok(())
        } else {
            Err(DataFusionError::Internal("the build side of a broadcast join must be a broadcast exchange".into()))
        }
    };
    Ok(match (spec.strategy, spec.build_side) {
        // DataFusion 55's sort-merge join null-fills an outer join's filtered-out rows into
        // batches of the other side's schema, whose columns may be declared non-nullable, and
        // fails. Both sides are already co-partitioned on the keys, so a partitioned hash join
        // gives the same rows; the plan still shows Spark's SortMergeJoin.
        (JoinStrategy::SortMerge, _)
            if spec.filter.is_some() && matches!(spec.join_type, JoinType::Left | JoinType::Right | JoinType::Full) =>
        {
            hash_join(left, right, PartitionMode::Partitioned)?.swap_inputs(PartitionMode::Partitioned)?
        }
        (JoinStrategy::SortMerge, _) => {
            let options = vec![SortOptions::new(false, true); spec.on.len()];
            Arc::new(SortMergeJoinExec::try_new(
                left,
                right,
                spec.on.clone(),
                spec.filter.clone(),
                spec.join_type,
                options,
                spec.null_equality,
            )?)
        }
        (JoinStrategy::ShuffledHash, Some(BuildSide::Left)) => {
            Arc::new(hash_join(left, right, PartitionMode::Partitioned)?)
        }
        (JoinStrategy::ShuffledHash, _) => {
            hash_join(left, right, PartitionMode::Partitioned)?.swap_inputs(PartitionMode::Partitioned)?
        }
        (JoinStrategy::BroadcastHash, Some(BuildSide::Left)) => {
            requires_broadcast(&left)?;
            Arc::new(hash_join(left, right, PartitionMode::CollectLeft)?)
        }
        (JoinStrategy::BroadcastHash, _) if spec.null_aware => {
            requires_broadcast(&right)?;
            let [(probe_key, build_key)] = spec.on.as_slice() else {
                return Err(DataFusionError::Internal("a null-aware anti join has one key".into()));
            };
            Arc::new(NullAwareAntiJoinExec::new(left, right, Arc::clone(probe_key), Arc::clone(build_key)))
        }
        (JoinStrategy::BroadcastHash, _) => {
            requires_broadcast(&right)?;
            hash_join(left, right, PartitionMode::CollectLeft)?.swap_inputs(PartitionMode::CollectLeft)?
        }
        (JoinStrategy::BroadcastNestedLoop, Some(BuildSide::Left)) => {
            Arc::new(NestedLoopJoinExec::try_new(left, right, spec.filter.clone(), &spec.join_type, None)?)
        }
        (JoinStrategy::BroadcastNestedLoop, _) => {
            NestedLoopJoinExec::try_new(left, right, spec.filter.clone(), &spec.join_type, None)?.swap_inputs()?
        }
        // Spark pairs every left partition with every right partition (nl × nr tasks, each
        // recomputing its inputs). We gather the left side once, held against the memory
        // pool, and stream every right partition past it: the same pairs, nr tasks, and no
        // input computed twice (which an exchange below could not do). Spark's product takes
        // the join's condition too; a nested loop over the gathered left side applies it, or,
        // where the condition equates keys (a SHUFFLE_REPLICATE_NL hint on an equi-join), a
        // hash table of the gathered left side finds the same pairs.
        (JoinStrategy::Cartesian, _) if !spec.on.is_empty() => {
            Arc::new(hash_join(gathered(left), right, PartitionMode::CollectLeft)?)
        }
        (JoinStrategy::Cartesian, _) if spec.filter.is_some() => {
            Arc::new(NestedLoopJoinExec::try_new(gathered(left), right, spec.filter.clone(), &spec.join_type, None)?)
        }
        (JoinStrategy::Cartesian, _) => Arc::new(CrossJoinExec::new(gathered(left), right)),
    })
}

/// One partition of all of `plan`'s rows.
fn gathered(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    if plan.output_partitioning().partition_count() == 1 { plan } else { Arc::new(CoalescePartitionsExec::new(plan)) }
}

impl DisplayAs for SparkJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.spec.strategy.spark_name())?;
        if self.spec.skew {
            write!(f, "(skew=true)")?;
        }
        write!(f, " {}", self.spec.spark_join_type())?;
        if let Some(side) = self.spec.build_side {
            write!(f, " {}", side.spark_name())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for SparkJoinExec {
    fn name(&self) -> &str {
        self.spec.strategy.spark_name()
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.apart.as_ref().map_or_else(|| self.inner.properties(), |apart| &apart.properties)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        match self.apart {
            Some(_) => vec![false, false],
            None => self.inner.maintains_input_order(),
        }
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let condition = self.spec.filter.as_ref().map(|filter| filter.expression());
        for expr in self.spec.on.iter().flat_map(|(l, r)| [l, r]).chain(condition) {
            if f(expr)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        let right = children.pop().ok_or_else(|| DataFusionError::Internal("join needs two children".into()))?;
        let left = children.pop().ok_or_else(|| DataFusionError::Internal("join needs two children".into()))?;
        let join = SparkJoinExec::try_new(self.spec.clone(), left, right)?;
        // A join taken apart has sides that give a shuffle partition each: it stays apart.
        Ok(Arc::new(SparkJoinExec { apart: self.apart.clone(), ..join }))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if !self.merges {
            return self.inner.execute(partition, context);
        }
        let batch_size = context.session_config().batch_size();
        if let Some(range) = self.apart.as_ref().and_then(|apart| apart.ranges.get(partition)).cloned() {
            // As many lanes as cores, each joining every `lanes`-th shuffle partition in turn:
            // the last coalesced partition still running keeps every core busy.
            let lanes = context.session_config().target_partitions().clamp(1, range.len().max(1));
            let mut joined = RecordBatchReceiverStreamBuilder::new(self.schema(), lanes);
            // A clone shares this join's sides and metrics.
            let join = Arc::new(self.clone());
            for lane in 0..lanes {
                let (join, context) = (Arc::clone(&join), Arc::clone(&context));
                let shuffle_partitions: Vec<usize> = range.clone().skip(lane).step_by(lanes).collect();
                let sender = joined.tx();
                joined.spawn(async move {
                    for shuffle_partition in shuffle_partitions {
                        let mut rows = join.join_shuffle_partition(partition, shuffle_partition, &context)?;
                        while let Some(batch) = rows.next().await {
                            if sender.send(batch).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Ok(())
                });
            }
            return Ok(joined.build());
        }
        let left = self.left.execute(partition, Arc::clone(&context))?;
        let right = self.right.execute(partition, Arc::clone(&context))?;
        let metrics = (&self.metrics, partition);
        Ok(merged(&self.spec, (left, right), self.schema(), batch_size, metrics, context.memory_pool()))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        if self.merges { Some(self.metrics.clone_inner()) } else { self.inner.metrics() }
    }
}

/// The join of these streams of its sides, on the merge loop of its join type.
fn merged(
    spec: &JoinSpec,
    (left, right): (SendableRecordBatchStream, SendableRecordBatchStream),
    schema: SchemaRef,
    batch_size: usize,
    metrics: (&ExecutionPlanMetricsSet, usize),
    pool: &Arc<dyn MemoryPool>,
) -> SendableRecordBatchStream {
    let (left_key, right_key) = spec.on.first().cloned().expect("one key");
    let existence = match spec.join_type {
        JoinType::LeftSemi => Existence::Semi,
        JoinType::LeftAnti => Existence::Anti,
        _ => {
            return merge_join::merge_inner_join(left, right, (left_key, right_key), schema, batch_size, metrics, pool);
        }
    };
    let join = (existence, spec.filter.clone());
    merge_semi_join(join, (left, left_key), (right, right_key), schema, batch_size, metrics, pool)
}

/// The metric counting the shuffle partitions a join sorted and joined one by one.
pub const SHUFFLE_PARTITIONS_APART: &str = "shuffle_partitions_apart";

/// How a join taken apart runs: the properties it then has, with no order, and the shuffle
/// partitions each of its partitions coalesces.
#[derive(Debug, Clone)]
struct Apart {
    properties: Arc<PlanProperties>,
    ranges: Arc<[Range<usize>]>,
}
