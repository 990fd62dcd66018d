//! Spark's `range()` relation: one non-null BIGINT column `id` from `start` to `end`
//! (exclusive) by `step`. Rows are generated lazily in as many partitions as the session runs
//! in parallel (or as the fourth argument, Spark's `numPartitions`, says), so `range(10000000)`
//! costs no memory up front and feeds every core.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{Session, TableProvider};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::memory::{LazyBatchGenerator, LazyMemoryExec};
use parking_lot::RwLock;

const BATCH_ROWS: i64 = 8192;

/// The rows of `range(start, end, step)`, `step` not 0, in `splits` partitions when given.
#[derive(Debug)]
pub(crate) struct RangeTable {
    start: i64,
    end: i64,
    step: i64,
    splits: Option<u64>,
    schema: SchemaRef,
}

impl RangeTable {
    pub(crate) fn new(start: i64, end: i64, step: i64, splits: Option<u64>) -> RangeTable {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RangeTable { start, end, step, splits, schema }
    }

    /// Number of rows, computed in 128 bits so extreme bounds cannot overflow.
    fn len(&self) -> u64 {
        let span = i128::from(self.end) - i128::from(self.start);
        let step = i128::from(self.step);
        if span == 0 || (span > 0) != (step > 0) {
            return 0;
        }
        ((span.abs() + step.abs() - 1) / step.abs()) as u64
    }
}

#[async_trait]
impl TableProvider for RangeTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows = limit.map_or(self.len(), |l| self.len().min(l as u64));
        let partitions = self.splits.unwrap_or(state.config().target_partitions() as u64).clamp(1, rows.max(1));
        let per_partition = rows.div_ceil(partitions);
        let generators = (0..partitions)
            .map(|p| {
                let first = p * per_partition;
                let count = per_partition.min(rows.saturating_sub(first));
                Arc::new(RwLock::new(RangeGenerator {
                    first_value: i128::from(self.start) + i128::from(first) * i128::from(self.step),
                    step: self.step,
                    remaining: count,
                    next: 0,
                    schema: Arc::clone(&self.schema),
                })) as Arc<RwLock<dyn LazyBatchGenerator>>
            })
            .collect();
        let exec = LazyMemoryExec::try_new(Arc::clone(&self.schema), generators)?;
        let exec: Arc<dyn ExecutionPlan> = Arc::new(exec);
        match projection {
            Some(p) if p.is_empty() => {
                // count(*) asks for no column; a zero-column batch still carries its row count.
                Ok(Arc::new(datafusion::physical_plan::projection::ProjectionExec::try_new(
                    Vec::<datafusion::physical_plan::projection::ProjectionExpr>::new(),
                    exec,
                )?))
            }
            _ => Ok(exec),
        }
    }
}

/// What a `range()` relation generates, as Spark's `Range` prints it and sizes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSplits {
    pub start: i128,
    pub step: i64,
    pub rows: u128,
    pub splits: usize,
}

/// The range a plan node generates, if it is a `range()` relation.
pub fn range_splits(plan: &dyn ExecutionPlan) -> Option<RangeSplits> {
    let exec = plan.downcast_ref::<LazyMemoryExec>()?;
    let generators = exec.generators();
    let parts: Vec<(i128, i64, u64)> = generators
        .iter()
        .map(|g| g.read().as_any().downcast_ref::<RangeGenerator>().map(|r| (r.first_value, r.step, r.remaining)))
        .collect::<Option<_>>()?;
    let (start, step, _) = *parts.first()?;
    Some(RangeSplits { start, step, rows: parts.iter().map(|p| u128::from(p.2)).sum(), splits: parts.len() })
}

#[derive(Debug, Clone)]
struct RangeGenerator {
    first_value: i128,
    step: i64,
    remaining: u64,
    next: u64,
    schema: SchemaRef,
}

impl fmt::Display for RangeGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Range: start={}, step={}, rows={}", self.first_value, self.step, self.remaining)
    }
}

impl LazyBatchGenerator for RangeGenerator {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn generate_next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.next >= self.remaining {
            return Ok(None);
        }
        let n = (self.remaining - self.next).min(BATCH_ROWS as u64);
        let base = self.first_value + i128::from(self.next) * i128::from(self.step);
        let values: Int64Array =
            (0..n).map(|i| (base + i128::from(i) * i128::from(self.step)) as i64).collect::<Vec<i64>>().into();
        self.next += n;
        Ok(Some(RecordBatch::try_new(Arc::clone(&self.schema), vec![Arc::new(values)])?))
    }

    fn reset_state(&self) -> Arc<RwLock<dyn LazyBatchGenerator>> {
        Arc::new(RwLock::new(RangeGenerator { next: 0, ..self.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_follow_spark() {
        assert_eq!(RangeTable::new(0, 10, 1, None).len(), 10);
        assert_eq!(RangeTable::new(0, 10, 3, None).len(), 4);
        assert_eq!(RangeTable::new(10, 0, -2, None).len(), 5);
        assert_eq!(RangeTable::new(0, 10, -1, None).len(), 0);
        assert_eq!(RangeTable::new(5, 5, 1, None).len(), 0);
        assert_eq!(RangeTable::new(i64::MIN, i64::MAX, i64::MAX, None).len(), 3);
    }
}
