//! The merge loop of Spark's `SortMergeJoin` for `LeftSemi` and `LeftAnti` joins, what `IN`,
//! `EXISTS` and `NOT EXISTS` subqueries become, on one key of an integral, date or timestamp
//! type, with or without a condition beyond the key.
//!
//! Spark's `SortMergeJoinExec` keeps a left row of a semi join at the first right row of its
//! key that the condition accepts, and a left row of an anti join where none does (or where
//! its key is null). This loop takes the left side a batch at a time and the right side a run
//! of equal keys at a time (`merge_join`'s sides), and keeps each left batch's chosen rows in
//! their order. A condition is evaluated over the pairs of a key's rows a batch of pairs at
//! once rather than pair by pair, in rounds: a left row is paired no further once a pair of it
//! passed.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::compute::{filter_record_batch, interleave, take};
use arrow::datatypes::SchemaRef;
use datafusion::common::{JoinSide, cast::as_boolean_array};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

use super::merge_join::{MergeLoop, Run, Side, Source, merge_stream, source_index};

/// Whether the join keeps the left rows that have a match, or those that have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Existence {
    Semi,
    Anti,
}

/// One partition of the join of each side's rows by its key: the left side's rows it keeps,
/// in their order.
pub(super) fn merge_semi_join(
    existence: Existence,
    left: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
    right: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
    filter: Option<JoinFilter>,
    batch_size: usize,
    metrics: (&ExecutionPlanMetricsSet, usize),
    pool: &Arc<dyn MemoryPool>,
) -> SendableRecordBatchStream {
    let schema = left.0.schema();
    let (left, right) = Side::pair(left, right, metrics.1, pool);
    let join = SemiJoin { existence, left, right, right_run: None, filter, batch_size: batch_size.max(1) };
    merge_stream(join, schema, metrics)
}

struct SemiJoin {
    existence: Existence,
    left: Side,
    right: Side,
    /// The right side's run of the last left key looked up, or of the next greater key, if
    /// it has been gathered.
    right_run: Option<Run>,
    filter: Option<JoinFilter>,
    batch_size: usize,
}

impl MergeLoop for SemiJoin {
    fn sides(&self) -> [&Side; 2] {
        [&self.left, &self.right]
    }

    async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        while self.left.ensure_rows().await? {
            let source = Arc::clone(self.left.current.as_ref().expect("rows left"));
            self.left.row = source.batch.num_rows();
            let matched = self.matched(&source).await?;
            let kept = match self.existence {
                Existence::Semi => BooleanArray::from(matched),
                Existence::Anti => matched.into_iter().map(|m| Some(!m)).collect(),
            };
            let batch = filter_record_batch(&source.batch, &kept)?;
            if batch.num_rows() > 0 {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }
}

impl SemiJoin {
    /// For each row of the left batch `left`, whether a right row matches it.
    async fn matched(&mut self, left: &Arc<Source>) -> Result<Vec<bool>> {
        let rows = left.batch.num_rows();
        let mut matched = vec![false; rows];
        // Under a condition: the right runs of the batch's keys, and each left row of those
        // keys with the index of its key's run.
        let mut runs: Vec<Run> = Vec::new();
        let mut paired: Vec<(u32, u32)> = Vec::new();
        let (keys, values) = (&left.keys, left.keys.values());
        let mut row = 0;
        while row < rows {
            if keys.is_null(row) {
                row += 1;
                continue;
            }
            let key = values[row];
            let run_end = (row + 1..rows).find(|&r| values[r] != key || keys.is_null(r)).unwrap_or(rows);
            // The right run of the key: found within the right side's current batch where it
            // lies wholly there, else gathered across batches.
            let ahead = self.right_run.as_ref().is_some_and(|run| run.key >= key);
            match if ahead { None } else { self.right.run_within_batch(key) } {
                Some(run) => self.right_run = run,
                None => {
                    while self.right_run.as_ref().is_none_or(|run| run.key < key) {
                        self.right_run = self.right.next_run().await?;
                        if self.right_run.is_none() {
                            break;
                        }
                    }
                }
            }
            let run = self.right_run.as_ref().filter(|run| run.key == key);
            match (run, &self.filter) {
                (None, _) => {}
                (Some(_), None) => matched[row..run_end].fill(true),
                (Some(run), Some(_)) => {
                    runs.push(run.clone());
                    let index = (runs.len() - 1) as u32;
                    paired.extend((row as u32..run_end as u32).map(|left_row| (left_row, index)));
                }
            }
            row = run_end;
        }
        if let Some(filter) = &self.filter {
            self.match_in_rounds(filter, &left.batch, &runs, paired, &mut matched)?;
        }
        Ok(matched)
    }

    /// Evaluates the condition over the pairs of each left row in `paired` and its key's
    /// right rows: in round `i`, every left row not yet matched with its run's `i`-th row, so
    /// that a left row is paired no further once one pair passed (most pass at the first).
    fn match_in_rounds(
        &self,
        filter: &JoinFilter,
        left: &RecordBatch,
        runs: &[Run],
        mut paired: Vec<(u32, u32)>,
        matched: &mut [bool],
    ) -> Result<()> {
        let mut round = 0;
        while !paired.is_empty() {
            for chunk in paired.chunks(self.batch_size) {
                let mut pairs = Pairs::default();
                for &(left_row, run) in chunk {
                    let (segment, right_row) = runs[run as usize].row(round);
                    pairs.push(left_row, &segment.source, right_row);
                }
                pairs.evaluate(filter, left, matched)?;
            }
            round += 1;
            paired.retain(|&(left_row, run)| !matched[left_row as usize] && runs[run as usize].rows > round);
        }
        Ok(())
    }
}

/// Pairs of a left row of the current batch and a right row, waiting for the condition.
#[derive(Default)]
struct Pairs {
    left_rows: Vec<u32>,
    right_sources: Vec<Arc<Source>>,
    right_rows: Vec<(usize, usize)>,
}

impl Pairs {
    fn push(&mut self, left_row: u32, right: &Arc<Source>, right_row: usize) {
        let source = source_index(&mut self.right_sources, right);
        self.left_rows.push(left_row);
        self.right_rows.push((source, right_row));
    }

    /// Marks the left rows of the pairs the condition accepts as matched.
    fn evaluate(self, filter: &JoinFilter, left: &RecordBatch, matched: &mut [bool]) -> Result<()> {
        let count = self.left_rows.len();
        let left_rows = UInt32Array::from(self.left_rows);
        // Most pairs read one right batch, whose rows a `take` gathers faster.
        let right_rows = match self.right_sources.as_slice() {
            [_] => Some(UInt32Array::from_iter_values(self.right_rows.iter().map(|(_, row)| *row as u32))),
            _ => None,
        };
        let columns = filter
            .column_indices()
            .iter()
            .map(|column| -> Result<ArrayRef> {
                Ok(match (column.side, &right_rows) {
                    (JoinSide::Left, _) => take(left.column(column.index), &left_rows, None)?,
                    (JoinSide::Right, Some(rows)) => {
                        take(self.right_sources[0].batch.column(column.index), rows, None)?
                    }
                    (JoinSide::Right, None) => {
                        let arrays: Vec<&dyn Array> =
                            self.right_sources.iter().map(|s| s.batch.column(column.index).as_ref()).collect();
                        interleave(&arrays, &self.right_rows)?
                    }
                    (JoinSide::None, _) => {
                        return Err(DataFusionError::Internal(
                            "a join condition reads a column of neither side".into(),
                        ));
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(count));
        let batch = RecordBatch::try_new_with_options(SchemaRef::clone(filter.schema()), columns, &options)?;
        let passed = filter.expression().evaluate(&batch)?.into_array(count)?;
        let passed = as_boolean_array(&passed)?;
        let passed = match passed.nulls() {
            Some(nulls) => passed.values() & nulls.inner(),
            None => passed.values().clone(),
        };
        for pair in passed.set_indices() {
            matched[left_rows.values()[pair] as usize] = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::common::JoinSide;
    use datafusion::execution::TaskContext;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column};
    use datafusion::physical_plan::common::collect;
    use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    use super::super::merge_join::tests::{Case, cases, side};
    use super::{Existence, merge_semi_join};

    /// The ids of the left rows the join keeps, against the definition: with the condition,
    /// a match is a right row of the same key whose id (its place on the sorted right side)
    /// is greater than the left row's.
    async fn kept((left, right, sizes, batch_size): &Case, existence: Existence, condition: bool) {
        let (left_plan, left_keys) = side("l", left, sizes.0);
        let (right_plan, right_keys) = side("r", right, sizes.1);
        let matches = |l: usize, key: &Option<i32>| {
            right_keys.iter().enumerate().any(|(r, other)| key.is_some() && key == other && (!condition || l < r))
        };
        let expected: Vec<i64> = (left_keys.iter().enumerate())
            .filter(|(l, key)| matches(*l, key) == (existence == Existence::Semi))
            .map(|(l, _)| l as i64)
            .collect();
        let filter = condition.then(|| {
            let ids = Schema::new(vec![
                Field::new("l_id", DataType::Int64, false),
                Field::new("r_id", DataType::Int64, false),
            ]);
            let less =
                BinaryExpr::new(Arc::new(Column::new("l_id", 0)), Operator::Lt, Arc::new(Column::new("r_id", 1)));
            let sides =
                vec![ColumnIndex { index: 1, side: JoinSide::Left }, ColumnIndex { index: 1, side: JoinSide::Right }];
            JoinFilter::new(Arc::new(less), sides, Arc::new(ids))
        });
        let context = Arc::new(TaskContext::default());
        let stream = merge_semi_join(
            existence,
            (left_plan.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("l_key", 0))),
            (right_plan.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("r_key", 0))),
            filter,
            *batch_size,
            (&ExecutionPlanMetricsSet::new(), 0),
            context.memory_pool(),
        );
        let output = collect(stream).await.unwrap();
        let ids: Vec<i64> =
            output.iter().flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec()).collect();
        let case = format!("{existence:?} condition {condition} left {left:?} right {right:?} sizes {sizes:?}");
        assert_eq!(ids, expected, "{case} batch size {batch_size}");
    }

    #[tokio::test]
    async fn keeps_the_left_rows_with_a_passing_match_or_without_one_in_their_order() {
        for case in cases() {
            for existence in [Existence::Semi, Existence::Anti] {
                kept(&case, existence, false).await;
                kept(&case, existence, true).await;
            }
        }
    }
}
