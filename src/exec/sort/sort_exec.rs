//! Spark's `SortExec`: sorts each partition (or the single partition of a global sort) by its
//! ordering.
//!
//! Spark's sorter radix-sorts 8-byte key prefixes when one integral, date or timestamp key
//! decides the order (`spark.sql.sort.enableRadixSort`, on by default). This sort goes further
//! where it can:
//! - rows already in order pass through after a check made as they arrive. Bucket files are
//!   written sorted and a bucketed scan reads each bucket's file in order, so the `Sort` that
//!   Spark's plan keeps above it costs one pass over the keys. When memory runs out while the
//!   rows are still in order, those so far go to disk as one run and the check goes on; runs
//!   in order are read back one after the other, with no merge;
//! - rows whose keys all have fixed-width types are packed into one integer per row, each key
//!   in the bits its values span in the partition, and radix-sorted when the keys fit in 64 bits
//!   (a bucketed write's bucket id and sort column do);
//! - everything else (a limit, wider keys, keys of other types, rows out of order in a
//!   partition that outgrows its memory, or `spark.sql.sort.enableRadixSort=false`) goes to
//!   DataFusion's external sort, which compares rows and spills.
//!
//! EXPLAIN ANALYZE counts the partitions that took each way.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::{SortOptions, interleave_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::common::Statistics;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::SpillFile;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr};
use datafusion::physical_plan::SpillManager;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, SpillMetrics,
};
use datafusion::physical_plan::sorts::sort::SortExec as ExternalSortExec;
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::keys::{self, BatchKeys, Packing, Span};
use super::radix::{self, Packed};
use crate::config::SparkConf;
use crate::exec::one_shot::{empty, one_shot_plan};

#[derive(Debug)]
pub struct SortExec {
    /// DataFusion's sort over the same input: the plan's properties and statistics, and the
    /// sort that runs when there is a limit.
    external: Arc<ExternalSortExec>,
    metrics: ExecutionPlanMetricsSet,
    /// The external sorts partitions were handed to, for their metrics.
    handed_over: Arc<Mutex<Vec<Arc<dyn ExecutionPlan>>>>,
}

impl SortExec {
    pub fn new(expr: LexOrdering, input: Arc<dyn ExecutionPlan>) -> Self {
        Self::from_external(ExternalSortExec::new(expr, input))
    }

    fn from_external(external: ExternalSortExec) -> Self {
        SortExec { external: Arc::new(external), metrics: ExecutionPlanMetricsSet::new(), handed_over: Arc::default() }
    }

    /// Every DataFusion sort in `plan` (those it lowers ORDER BY to) made this sort.
    pub fn replace_external_sorts(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| match node.downcast_ref::<ExternalSortExec>() {
            Some(sort) => Ok(Transformed::yes(Arc::new(Self::from_external(sort.clone())) as Arc<dyn ExecutionPlan>)),
            None => Ok(Transformed::no(node)),
        })
        .map(|t| t.data)
    }

    pub fn with_preserve_partitioning(self, preserve_partitioning: bool) -> Self {
        Self::from_external(self.external.as_ref().clone().with_preserve_partitioning(preserve_partitioning))
    }

    pub fn with_fetch(&self, fetch: Option<usize>) -> Self {
        Self::from_external(self.external.with_fetch(fetch))
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        self.external.input()
    }

    pub fn expr(&self) -> &LexOrdering {
        self.external.expr()
    }

    pub fn fetch(&self) -> Option<usize> {
        self.external.fetch()
    }

    pub fn preserve_partitioning(&self) -> bool {
        self.external.preserve_partitioning()
    }

    /// Sorts `input` as partition `partition` of this sort, or as a piece of it: a join that
    /// sorts each shuffle partition of a coalesced read apart sorts them here, one by one.
    pub fn sort_stream(
        &self,
        partition: usize,
        input: SendableRecordBatchStream,
        context: Arc<TaskContext>,
    ) -> SendableRecordBatchStream {
        let metrics = SortMetrics::new(&self.metrics, partition);
        let sort = PartitionSort {
            expr: self.expr().clone(),
            spill: SpillManager::new(context.runtime_env(), metrics.spill.clone(), self.schema()),
            runs: Vec::new(),
            metrics,
            handed_over: Arc::clone(&self.handed_over),
            reservation: MemoryConsumer::new(format!("SortExec[{partition}]"))
                .with_can_spill(true)
                .register(context.memory_pool()),
            context,
            schema: self.schema(),
        };
        let stream = futures::stream::once(sort.run(input)).try_flatten();
        Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream))
    }
}

impl DisplayAs for SortExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.external.fmt_as(t, f)
    }
}

impl ExecutionPlan for SortExec {
    fn name(&self) -> &str {
        "SortExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.external.properties()
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.external.input_distribution_requirements()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.external.benefits_from_input_partitioning()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.input()]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.external.apply_expressions(f)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        let external = ExternalSortExec::new(self.expr().clone(), children.swap_remove(0))
            .with_preserve_partitioning(self.preserve_partitioning())
            .with_fetch(self.fetch());
        Ok(Arc::new(Self::from_external(external)))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if self.fetch().is_some() {
            return self.external.execute(partition, context);
        }
        let input = self.input().execute(partition, Arc::clone(&context))?;
        Ok(self.sort_stream(partition, input, context))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let mut metrics = self.metrics.clone_inner();
        let handed_over = self.handed_over.lock().clone();
        let others = std::iter::once(Arc::clone(&self.external) as Arc<dyn ExecutionPlan>).chain(handed_over);
        for set in others.filter_map(|plan| plan.metrics()) {
            set.iter().for_each(|metric| metrics.push(Arc::clone(metric)));
        }
        Some(metrics)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.external.child_stats_requests(partition)
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.external.statistics_from_inputs(input_stats, args)
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        Some(Arc::new(SortExec::with_fetch(self, limit)))
    }

    fn fetch(&self) -> Option<usize> {
        SortExec::fetch(self)
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        self.external.cardinality_effect()
    }
}

/// What a sort's partitions measured: Spark's sort time, and which way each partition took.
struct SortMetrics {
    baseline: BaselineMetrics,
    in_order: Count,
    radix_sorted: Count,
    handed_over: Count,
    spill: SpillMetrics,
}

impl SortMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        SortMetrics {
            baseline: BaselineMetrics::new(metrics, partition),
            in_order: count("partitions_in_order"),
            radix_sorted: count("partitions_radix_sorted"),
            handed_over: count("partitions_sorted_externally"),
            spill: SpillMetrics::new(metrics, partition),
        }
    }
}

/// One partition's sort: buffers the rows, noting whether they arrive in order, then passes
/// them on, radix-sorts them or hands them to DataFusion's external sort.
struct PartitionSort {
    expr: LexOrdering,
    metrics: SortMetrics,
    handed_over: Arc<Mutex<Vec<Arc<dyn ExecutionPlan>>>>,
    reservation: MemoryReservation,
    /// Writes runs of rows that arrived in order when memory runs out before the end.
    spill: SpillManager,
    runs: Vec<Arc<dyn SpillFile>>,
    context: Arc<TaskContext>,
    schema: SchemaRef,
}

/// How the order of arriving rows is checked: by their normalized keys where every key has a
/// fixed width, else by Arrow's row format.
enum OrderCheck {
    /// The last batch's keys while the rows are in order, every batch's once they are not.
    Normalized {
        keys: Vec<BatchKeys>,
    },
    Rows {
        converter: RowConverter,
        last: Option<OwnedRow>,
    },
}

impl PartitionSort {
    async fn run(mut self, mut input: SendableRecordBatchStream) -> Result<SendableRecordBatchStream> {
        let options: Vec<SortOptions> = self.expr.iter().map(|e| e.options).collect();
        let schema = Arc::clone(&self.schema);
        let types = self.expr.iter().map(|e| e.expr.data_type(&schema)).collect::<Result<Vec<_>>>()?;
        let mut check = if types.iter().all(keys::normalizable) {
            OrderCheck::Normalized { keys: Vec::new() }
        } else {
            let fields = types.into_iter().zip(&options).map(|(t, o)| SortField::new_with_options(t, *o)).collect();
            OrderCheck::Rows { converter: RowConverter::new(fields)?, last: None }
        };
        let mut batches = Vec::new();
        let mut in_order = true;
        while let Some(batch) = input.next().await.transpose()? {
            let timer = self.metrics.baseline.elapsed_compute().timer();
            let mut bytes = batch.get_array_memory_size();
            match &mut check {
                OrderCheck::Normalized { keys } => {
                    let batch_keys = self.normalized_keys(&batch)?;
                    let was_in_order = in_order;
                    in_order = in_order && batch_keys.in_order_after(keys.last(), &options);
                    if in_order {
                        // Only the last row's keys are needed while the rows are in order. An
                        // empty batch has none: the next batch must follow the one before it.
                        if !batch_keys.is_empty() {
                            keys.clear();
                            keys.push(batch_keys);
                        }
                    } else {
                        if was_in_order {
                            // The first row out of order: the earlier batches' keys, for the sort.
                            *keys = batches.iter().map(|b| self.normalized_keys(b)).collect::<Result<_>>()?;
                            bytes += keys.iter().map(BatchKeys::memory_size).sum::<usize>();
                        }
                        bytes += batch_keys.memory_size();
                        keys.push(batch_keys);
                    }
                }
                OrderCheck::Rows { converter, last } => {
                    let columns =
                        self.expr.iter().map(|e| e.evaluate_to_sort_column(&batch)).collect::<Result<Vec<_>>>()?;
                    let values: Vec<_> = columns.into_iter().map(|c| c.values).collect();
                    let rows = converter.convert_columns(&values)?;
                    in_order = in_order
                        && last.as_ref().is_none_or(|l| rows.num_rows() == 0 || l.row() <= rows.row(0))
                        && rows.iter().zip(rows.iter().skip(1)).all(|(a, b)| a <= b);
                    *last = rows.num_rows().checked_sub(1).map(|i| rows.row(i).owned()).or(last.take());
                }
            }
            timer.done();
            batches.push(batch);
            let unsortable_here = !in_order && matches!(check, OrderCheck::Rows { .. });
            if unsortable_here {
                return self.hand_over(batches, input);
            }
            if self.reservation.try_grow(bytes).is_err() {
                if !in_order {
                    return self.hand_over(batches, input);
                }
                // The rows so far are in order: they go to disk as one run, and the check goes on.
                self.runs.extend(self.spill.spill_record_batch_and_finish(&batches, "SortExec in-order run")?);
                batches.clear();
                self.reservation.free();
            }
        }
        if in_order {
            self.metrics.in_order.add(1);
            let spilled = self.read_runs();
            return Ok(self.emit(spilled.chain(futures::stream::iter(batches.into_iter().map(Ok)))));
        }
        if !self.runs.is_empty() {
            return self.hand_over(batches, empty(schema));
        }
        let OrderCheck::Normalized { keys } = check else { unreachable!("handed over when out of order") };
        let radix = SparkConf::of(self.context.session_config())?.radix_sort;
        let Some(packing) = Packing::new(&Span::of(&keys, options.len()), &options).filter(|_| radix) else {
            return self.hand_over(batches, empty(schema));
        };
        let row_bits = bits_for(batches.iter().map(|b| b.num_rows()).max().unwrap_or(0));
        let position_bits = bits_for(batches.len()) + row_bits;
        if packing.bits + position_bits <= 64 {
            self.radix_sort::<u64>(batches, keys, &packing, row_bits, position_bits)
        } else {
            self.radix_sort::<u128>(batches, keys, &packing, row_bits, position_bits)
        }
    }

    /// Sorts the rows of `batches` by their packed keys and emits them in batches of the
    /// session's size.
    fn radix_sort<T: Packed>(
        self,
        batches: Vec<RecordBatch>,
        keys: Vec<BatchKeys>,
        packing: &Packing,
        row_bits: u32,
        position_bits: u32,
    ) -> Result<SendableRecordBatchStream> {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let elapsed = self.metrics.baseline.elapsed_compute().clone();
        let timer = elapsed.timer();
        let keys_bytes: usize = keys.iter().map(|k| k.memory_size()).sum();
        let packed_bytes = rows * size_of::<T>();
        if self.reservation.try_grow(2 * packed_bytes).is_err() {
            let schema = Arc::clone(&self.schema);
            return self.hand_over(batches, empty(schema));
        }
        let mut packed = Vec::with_capacity(rows);
        for (index, batch_keys) in keys.iter().enumerate() {
            let positions = (0..).map(|row: u64| ((index as u64) << row_bits) | row);
            packed
                .extend(packing.pack(batch_keys).into_iter().zip(positions).map(|(k, p)| T::new(k, p, position_bits)));
        }
        drop(keys);
        radix::sort(&mut packed, position_bits, packing.bits);
        self.reservation.shrink(packed_bytes + keys_bytes);
        timer.done();
        self.metrics.radix_sorted.add(1);

        let batch_size = self.context.session_config().batch_size().max(1);
        let row_mask = radix::low_bits(row_bits);
        let chunks = (0..rows.div_ceil(batch_size)).map(move |chunk| {
            let _timer = elapsed.timer();
            let end = ((chunk + 1) * batch_size).min(packed.len());
            let indices: Vec<(usize, usize)> = packed[chunk * batch_size..end]
                .iter()
                .map(|p| {
                    let position = p.position(position_bits);
                    ((position >> row_bits) as usize, (position & row_mask) as usize)
                })
                .collect();
            let sources: Vec<&RecordBatch> = batches.iter().collect();
            Ok(interleave_record_batch(&sources, &indices)?)
        });
        Ok(self.emit(futures::stream::iter(chunks)))
    }

    /// A stream of `batches` that counts their rows and holds this sort's memory until done.
    fn emit(
        self,
        batches: impl futures::Stream<Item = Result<RecordBatch>> + Send + 'static,
    ) -> SendableRecordBatchStream {
        let PartitionSort { metrics, reservation, schema, .. } = self;
        let stream = batches.inspect_ok(move |batch| {
            let _held = &reservation;
            metrics.baseline.record_output(batch.num_rows());
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }

    /// The normalized sort keys of `batch`.
    fn normalized_keys(&self, batch: &RecordBatch) -> Result<BatchKeys> {
        let keys = self
            .expr
            .iter()
            .map(|e| {
                let column = e.evaluate_to_sort_column(batch)?;
                Ok(keys::normalize(&column.values, e.options).expect("fixed-width keys"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BatchKeys::new(keys, batch.num_rows()))
    }

    /// The rows of the runs written so far, run after run.
    fn read_runs(&mut self) -> impl futures::Stream<Item = Result<RecordBatch>> + Send + 'static {
        let spill = self.spill.clone();
        let runs = std::mem::take(&mut self.runs);
        futures::stream::iter(runs).map(move |run| spill.read_spill_as_stream(run, None)).try_flatten()
    }

    /// Hands the runs written so far, `buffered` and the rest of `input` to DataFusion's
    /// external sort.
    fn hand_over(
        mut self,
        buffered: Vec<RecordBatch>,
        rest: SendableRecordBatchStream,
    ) -> Result<SendableRecordBatchStream> {
        self.reservation.free();
        self.metrics.handed_over.add(1);
        let stream = self.read_runs().chain(futures::stream::iter(buffered.into_iter().map(Ok))).chain(rest);
        let source = one_shot_plan(Box::pin(RecordBatchStreamAdapter::new(self.schema, stream)))?;
        let sort = Arc::new(ExternalSortExec::new(self.expr, source).with_preserve_partitioning(true));
        self.handed_over.lock().push(Arc::clone(&sort) as Arc<dyn ExecutionPlan>);
        sort.execute(0, self.context)
    }
}

/// The bits that number `count` things from 0.
fn bits_for(count: usize) -> u32 {
    usize::BITS - count.saturating_sub(1).leading_zeros()
}
