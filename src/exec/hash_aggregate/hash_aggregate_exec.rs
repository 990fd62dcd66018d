//! Spark's `HashAggregateExec`, run by DataFusion's aggregate with one shortcut: where a
//! partition's rows arrive grouped (each key in one run, the runs in ascending order, as a
//! bucketed scan reads files sorted by the grouping keys), the groups are found by comparing
//! each row with the one before instead of hashing every row. The order is checked as rows
//! arrive. At the first run out of order, or when the groups outgrow their share of memory,
//! the partition hands what it has aggregated so far, as partial states, and the rest of its
//! rows to DataFusion's hash aggregate, which spills. A partition whose rows are out of order
//! but fall in few groups (TPC-H's Q1: four) finds them by comparing packed keys instead
//! (`few_groups`), and is handed over only past those few.
//!
//! Under adaptive execution, an aggregate reading a coalesced read of a shuffle partitioned by
//! its keys aggregates each shuffle partition on its own, one after the other (see
//! `HashAggregateExec::shuffle_partitions`); EXPLAIN ANALYZE counts them.
//!
//! Spark swaps in a `SortAggregateExec` only where the child's ordering is known when planning
//! (`spark.sql.execution.replaceHashWithSortAgg`, off by default), and a bucket's order is known
//! only once its files are read. EXPLAIN shows the `HashAggregate` Spark plans; EXPLAIN ANALYZE
//! counts the partitions that took each way.

use std::any::Any;
use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, DynComparator, RecordBatch, UInt32Array, make_comparator, new_empty_array,
};
use datafusion::arrow::compute::kernels::partition::partition;
use datafusion::arrow::compute::{SortOptions, concat, take, take_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Statistics;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::{
    AggregateExec, AggregateInputMode, AggregateMode, AggregateOutputMode, aggregate_expressions,
};
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements, InputOrderMode, PlanProperties,
    replace_children_if_necessary,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::few_groups::{FewGroups, MAX_GROUPS};
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::downcast_plan::downcast_plan;
use crate::exec::one_shot::one_shot_plan;

/// The partitions aggregated by comparing neighbouring rows, as the metrics name them.
pub const PARTITIONS_AGGREGATED_IN_ORDER: &str = "partitions_aggregated_in_order";
/// The partitions whose rows, out of order, fell in few groups (`few_groups`).
pub const PARTITIONS_AGGREGATED_IN_FEW_GROUPS: &str = "partitions_aggregated_in_few_groups";
/// The partitions handed to DataFusion's hash aggregate.
pub const PARTITIONS_HASH_AGGREGATED: &str = "partitions_hash_aggregated";
/// The shuffle partitions of coalesced reads aggregated one by one.
pub const SHUFFLE_PARTITIONS_AGGREGATED_APART: &str = "shuffle_partitions_aggregated_apart";

/// The order grouped rows arrive in: Spark's ascending order, nulls first.
const ORDER: SortOptions = SortOptions { descending: false, nulls_first: true };

#[derive(Debug, Clone)]
pub struct HashAggregateExec {
    /// DataFusion's `AggregateExec`: what the plan is, and what runs when the rows are not
    /// grouped. Downcasts reach it, so every rule and EXPLAIN see the aggregate itself.
    aggregate: Arc<dyn ExecutionPlan>,
    metrics: ExecutionPlanMetricsSet,
    /// The hash aggregates partitions were handed to, for their metrics.
    handed_over: Arc<Mutex<Vec<Arc<dyn ExecutionPlan>>>>,
}

impl HashAggregateExec {
    fn new(aggregate: Arc<dyn ExecutionPlan>) -> Self {
        HashAggregateExec { aggregate, metrics: ExecutionPlanMetricsSet::new(), handed_over: Arc::default() }
    }

    /// Every aggregate in `plan` the shortcut can run becomes this operator.
    pub fn wrap_aggregates(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| match node.downcast_ref::<AggregateExec>() {
            // Downcasts see through this operator to the aggregate it wraps.
            _ if (node.as_ref() as &dyn Any).is::<Self>() => Ok(Transformed::no(node)),
            Some(aggregate) if groups_in_order(aggregate) => {
                Ok(Transformed::yes(Arc::new(Self::new(Arc::clone(&node))) as Arc<dyn ExecutionPlan>))
            }
            _ => Ok(Transformed::no(node)),
        })
        .map(|t| t.data)
    }

    /// `aggregate` in place of the one `plan` is or wraps, wrapped as that one was.
    pub fn in_place_of(plan: &Arc<dyn ExecutionPlan>, aggregate: AggregateExec) -> Arc<dyn ExecutionPlan> {
        let aggregate: Arc<dyn ExecutionPlan> = Arc::new(aggregate);
        if (plan.as_ref() as &dyn Any).is::<Self>() { Arc::new(Self::new(aggregate)) } else { aggregate }
    }

    fn aggregate(&self) -> &AggregateExec {
        wrapped(&self.aggregate)
    }

    /// Where output partition `partition` coalesces several shuffle partitions of a stage that
    /// spread the groups by their keys (the aggregate reads the stage's adaptive read directly,
    /// its input partitioned by its keys): those shuffle partitions.
    ///
    /// No group spans two shuffle partitions, so each is aggregated on its own, its groups (a
    /// fraction of the coalesced partition's) within the caches. Spark aggregates the coalesced
    /// partition whole; the rows are the same, and a hash aggregate's output has no order.
    fn shuffle_partitions(&self, partition: usize) -> Option<Range<usize>> {
        self.keyed_read()?.coalesced_range(partition)
    }

    /// The adaptive read this aggregate reads directly, of a shuffle that spread the groups by
    /// their keys: no group spans two of its shuffle partitions.
    pub fn keyed_read(&self) -> Option<Arc<AqeShuffleReadExec>> {
        let aggregate = self.aggregate();
        if !matches!(aggregate.mode(), AggregateMode::FinalPartitioned | AggregateMode::SinglePartitioned) {
            return None;
        }
        downcast_plan::<AqeShuffleReadExec>(aggregate.input())
    }

    /// The groups of shuffle partition `shuffle_partition` alone, one of those output partition
    /// `partition` coalesces: for this aggregate's partitions, one after the other, and for a
    /// join that takes the shuffle partitions below it apart.
    pub fn execute_shuffle_partition(
        &self,
        partition: usize,
        shuffle_partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let read = self
            .keyed_read()
            .ok_or_else(|| DataFusionError::Internal("aggregate does not read a shuffle by its keys".into()))?;
        MetricBuilder::new(&self.metrics).counter(SHUFFLE_PARTITIONS_AGGREGATED_APART, partition).add(1);
        let input = read.execute_shuffle_partition(partition, shuffle_partition, &context)?;
        let runs = self.runs(partition, &context);
        let Some(run) = runs.new_run()? else {
            // DataFusion's aggregate over this shuffle partition's rows, as where rows arrive
            // out of order.
            let aggregate = replace_children_if_necessary(Arc::clone(&self.aggregate), vec![one_shot_plan(input)?])?;
            self.handed_over.lock().push(Arc::clone(&aggregate));
            return aggregate.execute(0, context);
        };
        let stream = futures::stream::once(run.run(input)).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }

    fn runs(&self, partition: usize, context: &Arc<TaskContext>) -> Runs {
        Runs {
            aggregate: Arc::clone(&self.aggregate),
            metrics: self.metrics.clone(),
            handed_over: Arc::clone(&self.handed_over),
            partition,
            context: Arc::clone(context),
        }
    }
}

/// The `AggregateExec` this operator, and each of its runs, wraps.
fn wrapped(aggregate: &Arc<dyn ExecutionPlan>) -> &AggregateExec {
    aggregate.downcast_ref::<AggregateExec>().expect("wraps an AggregateExec")
}

/// What a run of the shortcut over one partition's rows, or one shuffle partition's of them,
/// is made from.
struct Runs {
    aggregate: Arc<dyn ExecutionPlan>,
    metrics: ExecutionPlanMetricsSet,
    handed_over: Arc<Mutex<Vec<Arc<dyn ExecutionPlan>>>>,
    partition: usize,
    context: Arc<TaskContext>,
}

impl Runs {
    /// A fresh run; `None` where a function has no array states for its argument types.
    fn new_run(&self) -> Result<Option<InOrder>> {
        let aggregate = wrapped(&self.aggregate);
        let Ok(accumulators) =
            aggregate.aggr_expr().iter().map(|f| f.create_groups_accumulator()).collect::<Result<Vec<_>>>()
        else {
            return Ok(None);
        };
        let group_by = aggregate.group_expr().expr();
        Ok(Some(InOrder {
            group_by_keys: group_by.iter().map(|(e, _)| Arc::clone(e)).collect(),
            arguments: aggregate_expressions(aggregate.aggr_expr(), aggregate.mode(), group_by.len())?,
            accumulators,
            keys: Vec::new(),
            key_bytes: 0,
            groups: 0,
            rows: 0,
            last_key: None,
            few_groups: None,
            group_indices: Vec::new(),
            new_group_rows: Vec::new(),
            // Handing the groups over is how this aggregate gives memory back.
            reservation: MemoryConsumer::new(format!("HashAggregateExec[{}]", self.partition))
                .with_can_spill(true)
                .register(self.context.memory_pool()),
            metrics: AggregateMetrics::new(&self.metrics, self.partition),
            handed_over: Arc::clone(&self.handed_over),
            aggregate: Arc::clone(&self.aggregate),
            context: Arc::clone(&self.context),
        }))
    }
}

/// Whether `aggregate` can find its groups as runs of equal keys: one plain grouping of keys
/// whose equality is their order's (not floats, whose NaN and -0.0 group apart from how they
/// compare), and functions that each keep their groups' states in arrays, with no filter,
/// ordering or DISTINCT, and no limit on the groups. Where the plan already knows the input's
/// order, DataFusion's aggregate streams its groups in that order, which the plan above may
/// rely on and a hand-over would lose.
fn groups_in_order(aggregate: &AggregateExec) -> bool {
    let input = aggregate.input().schema();
    let group_by = aggregate.group_expr();
    *aggregate.input_order_mode() == InputOrderMode::Linear
        && !group_by.is_empty()
        && group_by.is_single()
        && aggregate.limit_options().is_none()
        && aggregate.filter_expr().iter().all(Option::is_none)
        && aggregate
            .aggr_expr()
            .iter()
            .all(|f| f.groups_accumulator_supported() && f.order_bys().is_empty() && !f.is_distinct())
        && group_by.expr().iter().all(|(expr, _)| expr.data_type(&input).is_ok_and(|t| equality_is_order(&t)))
}

fn equality_is_order(data_type: &DataType) -> bool {
    data_type.is_integer()
        || matches!(
            data_type,
            DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(_, _)
                | DataType::Decimal128(_, _)
        )
}

impl DisplayAs for HashAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.aggregate().fmt_as(t, f)
    }
}

impl ExecutionPlan for HashAggregateExec {
    fn name(&self) -> &str {
        "HashAggregateExec"
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.aggregate.as_ref())
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.aggregate.properties()
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.aggregate.input_distribution_requirements()
    }

    fn required_input_ordering(&self) -> Vec<Option<datafusion::physical_expr::OrderingRequirements>> {
        self.aggregate.required_input_ordering()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        self.aggregate.maintains_input_order()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.aggregate.benefits_from_input_partitioning()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.aggregate.children()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.aggregate.apply_expressions(f)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(Self::new(replace_children_if_necessary(Arc::clone(&self.aggregate), children)?)))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let runs = self.runs(partition, &context);
        // Where a function turns out to have no array states for its argument types after all,
        // DataFusion's aggregate runs as planned.
        let Some(run) = runs.new_run()? else {
            return self.aggregate.execute(partition, context);
        };
        let schema = self.schema();
        let Some(range) = self.shuffle_partitions(partition) else {
            let input = self.aggregate().input().execute(partition, context)?;
            let stream = futures::stream::once(run.run(input)).try_flatten();
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)));
        };
        // One shuffle partition after the other, each aggregated to the end before the next
        // starts, so that one partition's groups at a time take memory. A clone shares this
        // aggregate's metrics and the aggregates it hands partitions to.
        let aggregate = Arc::new(self.clone());
        let stream = futures::stream::iter(range)
            .map(move |shuffle_partition| {
                aggregate.execute_shuffle_partition(partition, shuffle_partition, Arc::clone(&context))
            })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let mut metrics = self.metrics.clone_inner();
        let handed_over = self.handed_over.lock().clone();
        let others = std::iter::once(Arc::clone(&self.aggregate)).chain(handed_over);
        for set in others.filter_map(|plan| plan.metrics()) {
            set.iter().for_each(|metric| metrics.push(Arc::clone(metric)));
        }
        Some(metrics)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.aggregate.child_stats_requests(partition)
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.aggregate.statistics_from_inputs(input_stats, args)
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        self.aggregate.cardinality_effect()
    }
}

struct AggregateMetrics {
    baseline: BaselineMetrics,
    in_order: Count,
    in_few_groups: Count,
    hashed: Count,
}

impl AggregateMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        AggregateMetrics {
            baseline: BaselineMetrics::new(metrics, partition),
            in_order: count(PARTITIONS_AGGREGATED_IN_ORDER),
            in_few_groups: count(PARTITIONS_AGGREGATED_IN_FEW_GROUPS),
            hashed: count(PARTITIONS_HASH_AGGREGATED),
        }
    }
}

/// One partition's aggregation by runs of equal keys, or, once a run comes out of order, by
/// few groups' packed keys. Every group is held until the input ends: a group that reappeared
/// after it was emitted could not be merged any more.
struct InOrder {
    group_by_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Each function's arguments: raw columns, or the states a partial aggregate produced.
    arguments: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    /// Each group's keys, a chunk per input batch, one array per grouping key.
    keys: Vec<Vec<ArrayRef>>,
    key_bytes: usize,
    groups: usize,
    /// Rows aggregated so far.
    rows: usize,
    /// The last row's keys, to tell whether the next batch goes on with its group.
    last_key: Option<Vec<ArrayRef>>,
    /// The groups by their packed keys, once rows came out of order.
    few_groups: Option<FewGroups>,
    group_indices: Vec<usize>,
    /// The rows of a batch that first showed a group, where groups are found by packed keys.
    new_group_rows: Vec<u32>,
    reservation: MemoryReservation,
    metrics: AggregateMetrics,
    handed_over: Arc<Mutex<Vec<Arc<dyn ExecutionPlan>>>>,
    aggregate: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
}

impl InOrder {
    async fn run(mut self, mut input: SendableRecordBatchStream) -> Result<SendableRecordBatchStream> {
        let elapsed = self.metrics.baseline.elapsed_compute().clone();
        while let Some(batch) = input.next().await.transpose()? {
            let timer = elapsed.timer();
            let added = self.add(&batch)?;
            timer.done();
            if !added || self.runs_too_short() || self.reservation.try_resize(self.memory_size()).is_err() {
                let schema = self.input_schema();
                let rest = futures::stream::iter(if added { None } else { Some(Ok(batch)) }).chain(input);
                return self.hand_over(Box::pin(RecordBatchStreamAdapter::new(schema, rest)));
            }
        }
        match self.few_groups {
            Some(_) => self.metrics.in_few_groups.add(1),
            None => self.metrics.in_order.add(1),
        }
        let timer = elapsed.timer();
        let output = self.output()?;
        timer.done();
        let schema = output.schema();
        let pieces = self.pieces(&output)?;
        self.metrics.baseline.record_output(output.num_rows());
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::iter(pieces.into_iter().map(Ok)))))
    }

    /// `batch` in batches of the session's size, each with buffers of its own: a slice would
    /// count, wherever it is held, the memory of the whole.
    fn pieces(&self, batch: &RecordBatch) -> Result<Vec<RecordBatch>> {
        let (rows, batch_size) = (batch.num_rows(), self.context.session_config().batch_size());
        if rows <= batch_size {
            return Ok(vec![batch.clone()]);
        }
        (0..rows)
            .step_by(batch_size)
            .map(|offset| {
                let indices = UInt32Array::from_iter_values(offset as u32..(offset + batch_size).min(rows) as u32);
                Ok(take_record_batch(batch, &indices)?)
            })
            .collect()
    }

    /// A partial aggregate whose groups average fewer than two rows groups next to nothing;
    /// DataFusion's passes such rows on as states without grouping them.
    fn runs_too_short(&self) -> bool {
        self.raw_input() && !self.final_output() && self.groups * 2 > self.rows
    }

    /// Whether the input is rows, not a partial aggregate's states.
    fn raw_input(&self) -> bool {
        self.aggregate().mode().input_mode() == AggregateInputMode::Raw
    }

    fn final_output(&self) -> bool {
        self.aggregate().mode().output_mode() == AggregateOutputMode::Final
    }

    fn input_schema(&self) -> SchemaRef {
        self.aggregate().input().schema()
    }

    fn aggregate(&self) -> &AggregateExec {
        wrapped(&self.aggregate)
    }

    /// Adds `batch`'s rows to their groups, or returns false, adding nothing, where a run of
    /// them is out of order and the groups are not few, or where they outgrow the few.
    fn add(&mut self, batch: &RecordBatch) -> Result<bool> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(true);
        }
        let keys: Vec<ArrayRef> =
            self.group_by_keys.iter().map(|e| e.evaluate(batch)?.into_array(rows)).collect::<Result<_>>()?;
        if self.few_groups.is_some() {
            return self.add_to_few_groups(batch, &keys);
        }
        let runs = partition(&keys)?.ranges();
        let goes_on = match &self.last_key {
            None => false,
            Some(last) => match compare(&comparators(last, &keys)?, 0, 0) {
                Ordering::Less => false,
                Ordering::Equal => true,
                Ordering::Greater => return self.find_few_groups(batch, &keys),
            },
        };
        let within = comparators(&keys, &keys)?;
        if runs.windows(2).any(|pair| compare(&within, pair[0].start, pair[1].start) != Ordering::Less) {
            return self.find_few_groups(batch, &keys);
        }

        // Run k is group `first + k`; the first run may be the last batch's last group.
        let first = self.groups - usize::from(goes_on);
        self.group_indices.clear();
        for (k, run) in runs.iter().enumerate() {
            self.group_indices.extend(std::iter::repeat_n(first + k, run.len()));
        }
        let new_starts: UInt32Array = runs.iter().skip(usize::from(goes_on)).map(|r| r.start as u32).collect();
        let new_keys: Vec<ArrayRef> =
            keys.iter().map(|k| take(k.as_ref(), &new_starts, None)).collect::<Result<_, _>>()?;
        self.key_bytes += new_keys.iter().map(|k| k.get_array_memory_size()).sum::<usize>();
        self.keys.push(new_keys);
        self.groups = first + runs.len();
        self.rows += rows;
        self.last_key = Some(keys.iter().map(|k| k.slice(rows - 1, 1)).collect());
        self.update_accumulators(batch)?;
        Ok(true)
    }

    /// Where rows come out of order: the groups so far, if few and their keys fit a packed
    /// key, are found by packed keys from `batch` on.
    fn find_few_groups(&mut self, batch: &RecordBatch, keys: &[ArrayRef]) -> Result<bool> {
        let types: Vec<DataType> = keys.iter().map(|k| k.data_type().clone()).collect();
        let Some(mut few_groups) = FewGroups::new(&types).filter(|_| self.groups <= MAX_GROUPS) else {
            return Ok(false);
        };
        // The groups so far, in their order, as the packed keys' first groups.
        let held = self.group_keys()?;
        let found = few_groups.find(&held, &mut self.group_indices, &mut self.new_group_rows);
        self.keys.push(held);
        if !found {
            return Ok(false);
        }
        self.few_groups = Some(few_groups);
        self.last_key = None;
        self.add_to_few_groups(batch, keys)
    }

    /// Adds `batch`'s rows to the groups of their packed keys, or returns false, adding
    /// nothing, where a key does not fit or the groups would be more than few.
    fn add_to_few_groups(&mut self, batch: &RecordBatch, keys: &[ArrayRef]) -> Result<bool> {
        let Some(few_groups) = self.few_groups.as_mut() else { return Ok(false) };
        if !few_groups.find(keys, &mut self.group_indices, &mut self.new_group_rows) {
            return Ok(false);
        }
        self.groups = few_groups.len();
        if !self.new_group_rows.is_empty() {
            let rows = UInt32Array::from(self.new_group_rows.clone());
            let new_keys: Vec<ArrayRef> = keys.iter().map(|k| take(k, &rows, None)).collect::<Result<_, _>>()?;
            self.key_bytes += new_keys.iter().map(|k| k.get_array_memory_size()).sum::<usize>();
            self.keys.push(new_keys);
        }
        self.rows += batch.num_rows();
        self.update_accumulators(batch)?;
        Ok(true)
    }

    /// Adds `batch`'s arguments to the groups in `group_indices`.
    fn update_accumulators(&mut self, batch: &RecordBatch) -> Result<()> {
        let rows = batch.num_rows();
        let raw_input = self.raw_input();
        for (accumulator, arguments) in self.accumulators.iter_mut().zip(&self.arguments) {
            let values: Vec<ArrayRef> =
                arguments.iter().map(|e| e.evaluate(batch)?.into_array(rows)).collect::<Result<_>>()?;
            if raw_input {
                accumulator.update_batch(&values, &self.group_indices, None, self.groups)?;
            } else {
                accumulator.merge_batch(&values, &self.group_indices, self.groups)?;
            }
        }
        Ok(())
    }

    fn memory_size(&self) -> usize {
        let states: usize = self.accumulators.iter().map(|a| a.size()).sum();
        self.key_bytes + states + self.group_indices.capacity() * size_of::<usize>()
    }

    /// The groups' keys, one array per grouping key.
    fn group_keys(&mut self) -> Result<Vec<ArrayRef>> {
        let chunks = std::mem::take(&mut self.keys);
        (0..self.group_by_keys.len())
            .map(|i| {
                let columns: Vec<&dyn Array> = chunks.iter().map(|chunk| chunk[i].as_ref()).collect();
                match columns.as_slice() {
                    [] => Ok(new_empty_array(&self.group_by_keys[i].data_type(&self.input_schema())?)),
                    _ => Ok(concat(&columns)?),
                }
            })
            .collect()
    }

    /// Every group's results, or its states where a final aggregate follows.
    fn output(&mut self) -> Result<RecordBatch> {
        let columns = self.group_columns(!self.final_output())?;
        self.reservation.free();
        Ok(RecordBatch::try_new(self.aggregate.schema(), columns)?)
    }

    /// The groups' keys, then each function's results, or its partial states with `states`.
    fn group_columns(&mut self, states: bool) -> Result<Vec<ArrayRef>> {
        let mut columns = self.group_keys()?;
        for accumulator in &mut self.accumulators {
            if states {
                columns.extend(accumulator.state(EmitTo::All)?);
            } else {
                columns.push(accumulator.evaluate(EmitTo::All)?);
            }
        }
        Ok(columns)
    }

    /// The groups so far, as partial states, then the rest of the rows (`rest`), go to
    /// DataFusion's aggregates: a partial one over raw rows, then a final one unless this
    /// aggregate's output is itself partial.
    fn hand_over(mut self, rest: SendableRecordBatchStream) -> Result<SendableRecordBatchStream> {
        self.metrics.hashed.add(1);
        let aggregate = self.aggregate();
        let (aggr_expr, input_schema) = (aggregate.aggr_expr().to_vec(), aggregate.input_schema());
        let filters = vec![None; aggr_expr.len()];
        let (rest_states, final_group_by) = if self.raw_input() {
            let partial = AggregateExec::try_new(
                AggregateMode::Partial,
                aggregate.group_expr().clone(),
                aggr_expr.clone(),
                filters.clone(),
                one_shot_plan(rest)?,
                Arc::clone(&input_schema),
            )?;
            let group_by = partial.group_expr().as_final();
            (self.run_handed_over(Arc::new(partial))?, group_by)
        } else {
            (rest, aggregate.group_expr().clone())
        };
        let final_output = self.final_output();
        let held = self.held_states(rest_states.schema())?;
        let schema = rest_states.schema();
        let states = futures::stream::iter(held.into_iter().map(Ok)).chain(rest_states);
        let states: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(schema, states));
        self.reservation.free();
        if !final_output {
            return Ok(states);
        }
        let merge = AggregateExec::try_new(
            AggregateMode::Final,
            final_group_by,
            aggr_expr,
            filters,
            one_shot_plan(states)?,
            input_schema,
        )?;
        self.run_handed_over(Arc::new(merge))
    }

    /// The groups aggregated so far, as partial states.
    fn held_states(&mut self, schema: SchemaRef) -> Result<Vec<RecordBatch>> {
        if self.groups == 0 {
            return Ok(Vec::new());
        }
        let columns = self.group_columns(true)?;
        self.pieces(&RecordBatch::try_new(schema, columns)?)
    }

    fn run_handed_over(&self, plan: Arc<dyn ExecutionPlan>) -> Result<SendableRecordBatchStream> {
        self.handed_over.lock().push(Arc::clone(&plan));
        plan.execute(0, Arc::clone(&self.context))
    }
}

fn comparators(left: &[ArrayRef], right: &[ArrayRef]) -> Result<Vec<DynComparator>> {
    left.iter().zip(right).map(|(l, r)| Ok(make_comparator(l.as_ref(), r.as_ref(), ORDER)?)).collect()
}

/// Row `i` of the left keys against row `j` of the right ones, key by key.
fn compare(comparators: &[DynComparator], i: usize, j: usize) -> Ordering {
    comparators.iter().map(|cmp| cmp(i, j)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}
