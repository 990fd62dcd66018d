//! Spark's null-aware anti join (`BroadcastHashJoin LeftAnti BuildRight` with
//! `isNullAwareAntiJoin`), what `k NOT IN (SELECT p …)` runs as: the subquery's rows are
//! broadcast and every row of the outer side streams past them. SQL's three-valued `NOT IN`
//! keeps an outer row only if the subquery has no row at all, or has no NULL `p` and no `p`
//! equal to the row's `k`, which must not be NULL itself.
//!
//! DataFusion's null-aware anti join builds the outer side instead; this builds the subquery's
//! side once (held against the memory pool) and filters each outer partition as it streams.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt, TryStreamExt};
use parking_lot::Mutex;

/// The broadcast side as the probe needs it.
struct Subquery {
    keys: HashSet<Box<[u8]>>,
    has_rows: bool,
    has_null: bool,
    converter: RowConverter,
    _reservation: MemoryReservation,
}

type Build = Shared<BoxFuture<'static, std::result::Result<Arc<Subquery>, Arc<DataFusionError>>>>;

pub struct NullAwareAntiJoinExec {
    probe: Arc<dyn ExecutionPlan>,
    build: Arc<dyn ExecutionPlan>,
    probe_key: Arc<dyn PhysicalExpr>,
    build_key: Arc<dyn PhysicalExpr>,
    built: Mutex<Option<Build>>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for NullAwareAntiJoinExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NullAwareAntiJoinExec").field("probe_key", &self.probe_key).finish()
    }
}

impl NullAwareAntiJoinExec {
    /// Rows of `probe` whose `probe_key` is NOT IN the `build_key`s of `build`, a single
    /// partition (the broadcast).
    pub fn new(
        probe: Arc<dyn ExecutionPlan>,
        build: Arc<dyn ExecutionPlan>,
        probe_key: Arc<dyn PhysicalExpr>,
        build_key: Arc<dyn PhysicalExpr>,
    ) -> Self {
        // The outer side's rows, partitions and order, fewer of them.
        let properties = Arc::new(probe.properties().as_ref().clone());
        NullAwareAntiJoinExec { probe, build, probe_key, build_key, built: Mutex::new(None), properties }
    }

    fn subquery(&self, context: Arc<TaskContext>) -> Build {
        let start = || {
            let (build, key) = (Arc::clone(&self.build), Arc::clone(&self.build_key));
            async move {
                let data_type = key.data_type(&build.schema())?;
                let converter = RowConverter::new(vec![SortField::new(data_type)])?;
                let reservation = MemoryConsumer::new("NullAwareAntiJoin[build]").register(context.memory_pool());
                let (mut keys, mut has_rows, mut has_null) = (HashSet::new(), false, false);
                let mut stream = build.execute(0, context)?;
                while let Some(batch) = stream.next().await {
                    let batch = batch?;
                    let values = key.evaluate(&batch)?.into_array(batch.num_rows())?;
                    has_rows |= batch.num_rows() > 0;
                    has_null |= values.null_count() > 0;
                    let rows = converter.convert_columns(&[Arc::clone(&values)])?;
                    for (i, row) in rows.iter().enumerate() {
                        if values.is_valid(i) && !keys.contains(row.as_ref()) {
                            reservation.try_grow(row.as_ref().len() + std::mem::size_of::<Box<[u8]>>())?;
                            keys.insert(Box::from(row.as_ref()));
                        }
                    }
                }
                let subquery = Subquery { keys, has_rows, has_null, converter, _reservation: reservation };
                Ok(Arc::new(subquery))
            }
            .map(|built: Result<_>| built.map_err(Arc::new))
            .boxed()
            .shared()
        };
        self.built.lock().get_or_insert_with(start).clone()
    }
}

/// Which rows of `batch`, whose key column is `keys`, the anti join keeps.
fn kept(subquery: &Subquery, batch: &RecordBatch, key: &Arc<dyn PhysicalExpr>) -> Result<RecordBatch> {
    if !subquery.has_rows {
        return Ok(batch.clone());
    }
    if subquery.has_null {
        return Ok(batch.slice(0, 0));
    }
    let values = key.evaluate(batch)?.into_array(batch.num_rows())?;
    let rows = subquery.converter.convert_columns(&[Arc::clone(&values)])?;
    let mask: BooleanArray = rows
        .iter()
        .enumerate()
        .map(|(i, row)| Some(values.is_valid(i) && !subquery.keys.contains(row.as_ref())))
        .collect();
    Ok(filter_record_batch(batch, &mask)?)
}

impl DisplayAs for NullAwareAntiJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "NullAwareAntiJoinExec: {} NOT IN {}", self.probe_key, self.build_key)
    }
}

impl ExecutionPlan for NullAwareAntiJoinExec {
    fn name(&self) -> &str {
        "NullAwareAntiJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.probe, &self.build]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        if f(&self.probe_key)? == TreeNodeRecursion::Stop {
            return Ok(TreeNodeRecursion::Stop);
        }
        f(&self.build_key)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true, false]
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        let [probe, build] = <[_; 2]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("a null-aware anti join has two children".into()))?;
        Ok(Arc::new(Self::new(probe, build, Arc::clone(&self.probe_key), Arc::clone(&self.build_key))))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let subquery = self.subquery(Arc::clone(&context));
        let probe = self.probe.execute(partition, context)?;
        let key = Arc::clone(&self.probe_key);
        let stream = futures::stream::once(async move {
            let subquery = subquery.await.map_err(|e| DataFusionError::from(&e))?;
            Ok::<_, DataFusionError>(probe.map(move |batch| kept(&subquery, &batch?, &key)))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), stream)))
    }
}
