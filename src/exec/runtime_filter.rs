//! Runtime filters: the rows of one side of a join dropped before the exchange that feeds it,
//! where the other side, run first, has none of their keys.
//!
//! Spark's `InjectRuntimeFilter` plans such a filter, a bloom filter of the other side's keys
//! (`might_contain`), only where the side it filters scans more than
//! `spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold` (10 GB), so
//! Spark's plans at our scales have none. Here adaptive execution adds them as it runs
//! (`planner::adaptive::inject_runtime_filter`), under Spark's plan: EXPLAIN shows no
//! operator for them, EXPLAIN ANALYZE the keys gathered and the rows dropped.
//!
//! `RuntimeFilterExec` plays both parts ([`KeyRole`]): on the side that runs first it passes
//! the rows on to its exchange and gathers the hashes of their keys into [`RuntimeKeys`]
//! (EXPLAIN ANALYZE names it `KeyCollectorExec`); below the other side's exchange it keeps the
//! rows whose key hash is among them. A hash shared by chance only
//! lets a row through to the join, which drops it, so the answers are those of the plan
//! without the filter.

use std::fmt;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties};
use futures::StreamExt;
use parking_lot::Mutex;

use crate::storage::bucket_hash::hash_columns;

/// Rows of the side run first past which its keys are not gathered: a filter of that many
/// keys would drop little.
const MAX_KEYS: usize = 1 << 22;
/// Bits of the key set per key gathered: about one row in sixteen without a key on the other
/// side passes by chance.
const BITS_PER_KEY: usize = 16;
/// Rows a filter looks at before it judges whether it drops enough to go on.
const TRIAL_ROWS: usize = 1 << 17;
/// The share of rows a filter must drop, over its trial, to go on filtering.
const WORTHWHILE_DROP: f64 = 0.1;

/// The metric of the rows a filter dropped.
pub const ROWS_DROPPED: &str = "rows_dropped_by_runtime_filter";
/// The metric of the rows whose keys a collector gathered.
pub const KEYS_GATHERED: &str = "join_keys_gathered";

/// The key hashes of the side of a join that runs first, gathered as its exchange's map side
/// runs. Until they are all in, the exchange of the side they filter waits.
#[derive(Debug, Default)]
pub struct RuntimeKeys {
    gathering: Mutex<Gathering>,
    /// `Some(None)`: no filter after all (too many keys, no memory, or given up).
    ready: OnceLock<Option<KeySet>>,
}

#[derive(Debug, Default)]
struct Gathering {
    hashes: Vec<u32>,
    partitions_done: usize,
    reservation: Option<MemoryReservation>,
}

impl RuntimeKeys {
    /// Whether every key is in (or the filter given up).
    pub fn is_ready(&self) -> bool {
        self.ready.get().is_some()
    }

    /// Lets the waiting side run unfiltered, where the keys are not all in.
    pub fn give_up(&self) {
        self.give_up_holding(&mut self.gathering.lock());
    }

    /// Adds one partition's hashes; once `partitions` have come in, the key set is built.
    fn add(&self, hashes: &[u32], partitions: usize, context: &TaskContext) {
        let mut gathering = self.gathering.lock();
        if self.ready.get().is_none() {
            let within = gathering.hashes.len() + hashes.len() <= MAX_KEYS;
            let reservation = gathering
                .reservation
                .get_or_insert_with(|| MemoryConsumer::new("RuntimeKeys").register(context.memory_pool()));
            let fits = within && reservation.try_grow(std::mem::size_of_val(hashes)).is_ok();
            match fits {
                true => gathering.hashes.extend_from_slice(hashes),
                false => self.give_up_holding(&mut gathering),
            }
        }
        gathering.partitions_done += 1;
        if gathering.partitions_done == partitions && self.ready.get().is_none() {
            let set = KeySet::of(&gathering.hashes);
            if let Some(reservation) = gathering.reservation.as_mut() {
                reservation.resize(set.bits.len() * 8);
            }
            gathering.hashes = Vec::new();
            let _ = self.ready.set(Some(set));
        }
    }

    fn give_up_holding(&self, gathering: &mut Gathering) {
        let _ = self.ready.set(None);
        gathering.hashes = Vec::new();
        if let Some(reservation) = gathering.reservation.as_mut() {
            reservation.free();
        }
    }

    fn set(&self) -> Option<&KeySet> {
        self.ready.get().and_then(Option::as_ref)
    }
}

/// A bit per slot of a power-of-two table, set where a gathered key hash falls.
#[derive(Debug)]
struct KeySet {
    bits: Vec<u64>,
    /// `64 - log2(slots)`: a hash's slot is the top bits of its mix.
    shift: u32,
}

impl KeySet {
    fn of(hashes: &[u32]) -> Self {
        let slots = (hashes.len() * BITS_PER_KEY).next_power_of_two().max(1 << 12);
        let mut set = KeySet { bits: vec![0; slots / 64], shift: 64 - slots.trailing_zeros() };
        for &hash in hashes {
            let slot = set.slot(hash);
            set.bits[slot / 64] |= 1 << (slot % 64);
        }
        set
    }

    /// The top bits of the hash mixed over 64 bits (MurmurHash3's finalizer), so that keys
    /// fall evenly whichever bits of the hash vary.
    fn slot(&self, hash: u32) -> usize {
        let mut mixed = u64::from(hash);
        mixed = (mixed ^ (mixed >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        mixed = (mixed ^ (mixed >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        ((mixed ^ (mixed >> 33)) >> self.shift) as usize
    }

    fn contains(&self, hash: u32) -> bool {
        let slot = self.slot(hash);
        self.bits[slot / 64] & (1 << (slot % 64)) != 0
    }
}

/// Spark's hash of each row's keys (columns `keys`), and which rows have no null key: a null
/// key joins nothing.
fn key_hashes(batch: &RecordBatch, keys: &[usize]) -> Result<(Vec<u32>, Option<NullBuffer>)> {
    let columns: Vec<ArrayRef> = keys.iter().map(|&k| Arc::clone(batch.column(k))).collect();
    let valid =
        columns.iter().fold(None, |valid, column| NullBuffer::union(valid.as_ref(), column.logical_nulls().as_ref()));
    let hashes = hash_columns(&columns, batch.num_rows())?.into_iter().map(|h| h as u32).collect();
    Ok((hashes, valid))
}

/// What a runtime filter's operator does with the keys (columns `keys`) of the rows it passes.
#[derive(Debug, Clone)]
pub enum KeyRole {
    /// Gathers their hashes into the set, on the side that runs first.
    Gathers(Arc<RuntimeKeys>),
    /// Keeps the rows whose key hash is in the set, once every key is in; with no set (given
    /// up), every row.
    Filters(Arc<RuntimeKeys>),
}

/// One side's part in a runtime filter, right below its exchange or its partial aggregate.
#[derive(Debug)]
pub struct RuntimeFilterExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    role: KeyRole,
    metrics: ExecutionPlanMetricsSet,
}

impl RuntimeFilterExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<usize>, role: KeyRole) -> Self {
        RuntimeFilterExec { input, keys, role, metrics: ExecutionPlanMetricsSet::new() }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The key set a filter waits for; `None` for the side that gathers it.
    pub fn awaited(&self) -> Option<&Arc<RuntimeKeys>> {
        match &self.role {
            KeyRole::Filters(keys) => Some(keys),
            KeyRole::Gathers(_) => None,
        }
    }

    fn gather(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        into: &Arc<RuntimeKeys>,
    ) -> Result<SendableRecordBatchStream> {
        let gathering = Gathered {
            input: self.input.execute(partition, Arc::clone(&context))?,
            keys: self.keys.clone(),
            hashes: Vec::new(),
            counted: MetricBuilder::new(&self.metrics).counter(KEYS_GATHERED, partition),
        };
        let (into, partitions) = (Arc::clone(into), self.input.output_partitioning().partition_count());
        let stream = futures::stream::unfold(Some(gathering), move |gathering| {
            let (into, context) = (Arc::clone(&into), Arc::clone(&context));
            async move {
                let mut gathering = gathering?;
                match gathering.input.next().await {
                    Some(Ok(batch)) => match gathering.gather(&batch) {
                        Ok(()) => Some((Ok(batch), Some(gathering))),
                        Err(e) => Some((Err(e), None)),
                    },
                    Some(Err(e)) => Some((Err(e), None)),
                    // The partition's hashes go in once its last row has passed.
                    None => {
                        into.add(&gathering.hashes, partitions, &context);
                        None
                    }
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }

    fn filter(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        by: &Arc<RuntimeKeys>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let dropped: Count = MetricBuilder::new(&self.metrics).counter(ROWS_DROPPED, partition);
        let (keys, by) = (self.keys.clone(), Arc::clone(by));
        let mut filtering = Filtering { seen: 0, dropped: 0, stopped: false };
        let stream = input.map(move |batch| {
            let batch = batch?;
            let kept = match by.set() {
                Some(set) => {
                    let _timer = baseline.elapsed_compute().timer();
                    let rows = batch.num_rows();
                    let kept = filtering.filter(batch, &keys, set)?;
                    dropped.add(rows - kept.num_rows());
                    kept
                }
                None => batch,
            };
            baseline.record_output(kept.num_rows());
            Ok(kept)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }
}

impl DisplayAs for RuntimeFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: keys={:?}", self.name(), self.keys)
    }
}

/// One partition of a gathering side: its input and the key hashes of the rows passed so far.
struct Gathered {
    input: SendableRecordBatchStream,
    keys: Vec<usize>,
    hashes: Vec<u32>,
    counted: Count,
}

impl Gathered {
    fn gather(&mut self, batch: &RecordBatch) -> Result<()> {
        // Past the most keys a filter takes, the filter is given up: the rest need no hashing.
        if self.hashes.len() > MAX_KEYS {
            return Ok(());
        }
        let (hashes, valid) = key_hashes(batch, &self.keys)?;
        let before = self.hashes.len();
        match valid {
            None => self.hashes.extend_from_slice(&hashes),
            Some(valid) => self.hashes.extend(valid.valid_indices().map(|row| hashes[row])),
        }
        self.counted.add(self.hashes.len() - before);
        Ok(())
    }
}

/// One partition's filtering: it stops once its trial shows it drops too little.
struct Filtering {
    seen: usize,
    dropped: usize,
    stopped: bool,
}

impl Filtering {
    fn filter(&mut self, batch: RecordBatch, keys: &[usize], set: &KeySet) -> Result<RecordBatch> {
        if self.stopped {
            return Ok(batch);
        }
        let (hashes, valid) = key_hashes(&batch, keys)?;
        let kept = BooleanBuffer::collect_bool(batch.num_rows(), |row| {
            valid.as_ref().is_none_or(|valid| valid.is_valid(row)) && set.contains(hashes[row])
        });
        self.seen += batch.num_rows();
        self.dropped += batch.num_rows() - kept.count_set_bits();
        if self.seen >= TRIAL_ROWS && (self.dropped as f64) < WORTHWHILE_DROP * self.seen as f64 {
            self.stopped = true;
        }
        Ok(filter_record_batch(&batch, &BooleanArray::new(kept, None))?)
    }
}

impl ExecutionPlan for RuntimeFilterExec {
    fn name(&self) -> &str {
        match self.role {
            KeyRole::Gathers(_) => "KeyCollectorExec",
            KeyRole::Filters(_) => "RuntimeFilterExec",
        }
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(RuntimeFilterExec::new(children.swap_remove(0), self.keys.clone(), self.role.clone())))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        match &self.role {
            KeyRole::Gathers(into) => self.gather(partition, context, into),
            KeyRole::Filters(by) => self.filter(partition, context, by),
        }
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::bucket_hash::{SPARK_HASH_SEED, hash_long};

    #[test]
    fn a_key_set_holds_every_key_gathered_and_few_others() {
        // Keys in a run, as surrogate keys are, and Spark's hashes of them.
        let spark_hash = |key: i64| hash_long(key, SPARK_HASH_SEED) as u32;
        let gathered: Vec<u32> = (0..50_000).map(spark_hash).collect();
        let set = KeySet::of(&gathered);
        assert!(gathered.iter().all(|&hash| set.contains(hash)));
        let passed = (50_000..250_000).map(spark_hash).filter(|&hash| set.contains(hash)).count();
        // 50 000 keys set under 5 % of 2^20 slots: about 10 000 of the 200 000 others pass.
        assert!(passed < 12_500, "{passed} of 200000 passed");
    }
}
