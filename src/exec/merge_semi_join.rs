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
//! passed. A condition that only compares a column of each side, of one integral, date or
//! timestamp type (Q21 of TPC-H: `NOT (l2.l_suppkey = l1.l_suppkey)`), is instead evaluated on
//! the two values of each pair as soon as a key's run is found, each left row's run read up to
//! its first passing row.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{filter_record_batch, interleave, take};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Int32Type, Int64Type, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::{JoinSide, cast::as_boolean_array};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, NotExpr};
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
    (existence, filter): (Existence, Option<JoinFilter>),
    left: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
    right: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
    schema: SchemaRef,
    batch_size: usize,
    metrics: (&ExecutionPlanMetricsSet, usize),
    pool: &Arc<dyn MemoryPool>,
) -> SendableRecordBatchStream {
    let (left, right) = Side::pair(left, right, metrics.1, pool);
    let comparison = filter.as_ref().and_then(ColumnComparison::of);
    let join = SemiJoin { existence, left, right, right_run: None, filter, comparison, batch_size: batch_size.max(1) };
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
    /// The filter, where it only compares a column of each side.
    comparison: Option<ColumnComparison>,
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
            let keep = self.existence == Existence::Semi;
            let kept = BooleanArray::new(BooleanBuffer::collect_bool(matched.len(), |row| matched[row] == keep), None);
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
        let mut pending = Pending::default();
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
                None if self.right_run.as_ref().is_none_or(|run| run.key < key) => {
                    // The right side is about to pass the batches the pending pairs read, and
                    // to stop counting their memory: the condition settles them first.
                    self.settle(&left.batch, &mut pending, &mut matched)?;
                    while self.right_run.as_ref().is_none_or(|run| run.key < key) {
                        self.right_run = self.right.next_run(self.filter.is_some()).await?;
                        if self.right_run.is_none() {
                            break;
                        }
                    }
                }
                None => {}
            }
            match (self.right_run.as_ref().filter(|run| run.key == key), &self.filter) {
                (None, _) => {}
                (Some(_), None) => matched[row..run_end].fill(true),
                (Some(run), Some(_)) => match self.comparison {
                    Some(comparison) => comparison.settle_run(&left.batch, row..run_end, run, &mut matched),
                    None => {
                        pending.runs.push(run.clone());
                        let index = (pending.runs.len() - 1) as u32;
                        pending.paired.extend((row as u32..run_end as u32).map(|left_row| (left_row, index)));
                    }
                },
            }
            row = run_end;
        }
        self.settle(&left.batch, &mut pending, &mut matched)?;
        Ok(matched)
    }

    /// Evaluates the condition over the pairs of each pending left row and its key's right
    /// rows, in rounds: each round pairs every left row not yet matched with the next of its
    /// run's rows, so that a left row is paired no further once one pair passed (most pass
    /// at the first). When few left rows remain, a round takes several rows of each run, so
    /// that a long run is not evaluated a pair at a time.
    fn settle(&self, left: &RecordBatch, pending: &mut Pending, matched: &mut [bool]) -> Result<()> {
        let Some(filter) = &self.filter else { return Ok(()) };
        let (runs, mut paired) = (std::mem::take(&mut pending.runs), std::mem::take(&mut pending.paired));
        let mut first = 0;
        while !paired.is_empty() {
            let width = (self.batch_size / paired.len()).max(1);
            for chunk in paired.chunks((self.batch_size / width).max(1)) {
                let mut pairs = Pairs::default();
                for &(left_row, run) in chunk {
                    let run = &runs[run as usize];
                    for index in first..(first + width).min(run.rows) {
                        let (segment, right_row) = run.row(index);
                        pairs.push(left_row, &segment.source, right_row);
                    }
                }
                pairs.evaluate(filter, left, matched)?;
            }
            first += width;
            paired.retain(|&(left_row, run)| !matched[left_row as usize] && runs[run as usize].rows > first);
        }
        Ok(())
    }
}

/// A condition that compares a column of each side, both of one type whose values compare as
/// integers: `left op right`, a `NOT` folded into `op`. A NULL on either side fails it.
#[derive(Debug, Clone, Copy)]
struct ColumnComparison {
    left: usize,
    right: usize,
    op: Operator,
    data_type: Comparable,
}

/// The types a [`ColumnComparison`] reads.
#[derive(Debug, Clone, Copy)]
enum Comparable {
    Int32,
    Int64,
    Date32,
    Timestamp,
}

impl ColumnComparison {
    fn of(filter: &JoinFilter) -> Option<Self> {
        let (expression, negated) = match filter.expression().downcast_ref::<NotExpr>() {
            Some(not) => (not.arg(), true),
            None => (filter.expression(), false),
        };
        let binary = expression.downcast_ref::<BinaryExpr>()?;
        let column = |operand: &Arc<dyn PhysicalExpr>| {
            let index = operand.downcast_ref::<Column>()?.index();
            Some((filter.column_indices().get(index)?, filter.schema().field(index).data_type()))
        };
        let ((a, a_type), (b, b_type)) = (column(binary.left())?, column(binary.right())?);
        let data_type = match (a_type, b_type) {
            (DataType::Int32, DataType::Int32) => Comparable::Int32,
            (DataType::Int64, DataType::Int64) => Comparable::Int64,
            (DataType::Date32, DataType::Date32) => Comparable::Date32,
            (DataType::Timestamp(TimeUnit::Microsecond, x), DataType::Timestamp(TimeUnit::Microsecond, y))
                if x == y =>
            {
                Comparable::Timestamp
            }
            _ => return None,
        };
        let op = if negated { binary.op().negate()? } else { *binary.op() };
        let (left, right, op) = match (a.side, b.side) {
            (JoinSide::Left, JoinSide::Right) => (a.index, b.index, op),
            (JoinSide::Right, JoinSide::Left) => (b.index, a.index, op.swap()?),
            _ => return None,
        };
        matches!(op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq)
            .then_some(ColumnComparison { left, right, op, data_type })
    }

    /// Marks each of the left rows `left_rows`, all of `run`'s key, matched where a row of the
    /// run passes, each segment's column read once for all of them rather than once a row.
    fn settle_run(self, left: &RecordBatch, left_rows: Range<usize>, run: &Run, matched: &mut [bool]) {
        match self.data_type {
            Comparable::Int32 => self.settle_values::<Int32Type>(left, left_rows, run, matched),
            Comparable::Int64 => self.settle_values::<Int64Type>(left, left_rows, run, matched),
            Comparable::Date32 => self.settle_values::<Date32Type>(left, left_rows, run, matched),
            Comparable::Timestamp => self.settle_values::<TimestampMicrosecondType>(left, left_rows, run, matched),
        }
    }

    fn settle_values<T: ArrowPrimitiveType>(
        self,
        left: &RecordBatch,
        left_rows: Range<usize>,
        run: &Run,
        matched: &mut [bool],
    ) where
        T::Native: Ord,
    {
        let left_values = left.column(self.left).as_primitive::<T>();
        for segment in run.segments() {
            let right = segment.source.batch.column(self.right).as_primitive::<T>();
            let rows = segment.rows();
            let values = &right.values()[rows.clone()];
            let right_nulls = right.nulls().filter(|nulls| nulls.null_count() > 0);
            for row in left_rows.clone() {
                if matched[row] || left_values.is_null(row) {
                    continue;
                }
                let value = left_values.value(row);
                matched[row] = match right_nulls {
                    None => values.iter().any(|v| self.holds(value.cmp(v))),
                    Some(nulls) => rows.clone().zip(values).any(|(r, v)| nulls.is_valid(r) && self.holds(value.cmp(v))),
                };
            }
        }
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self.op {
            Operator::Eq => ordering.is_eq(),
            Operator::NotEq => ordering.is_ne(),
            Operator::Lt => ordering.is_lt(),
            Operator::LtEq => ordering.is_le(),
            Operator::Gt => ordering.is_gt(),
            _ => ordering.is_ge(),
        }
    }
}

/// Under a condition: the right runs of the left batch's keys not yet settled, and each left
/// row of those keys with the index of its key's run.
#[derive(Default)]
struct Pending {
    runs: Vec<Run>,
    paired: Vec<(u32, u32)>,
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

    use arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
    use datafusion::common::{JoinSide, ScalarValue};
    use datafusion::execution::{SendableRecordBatchStream, TaskContext};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::PhysicalExpr;
    use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, Column, NotExpr, lit};
    use datafusion::physical_plan::ExecutionPlan;
    use datafusion::physical_plan::common::collect;
    use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
    use datafusion::physical_plan::test::TestMemoryExec;

    use super::super::merge_join::tests::{Case, cases, context_of_64_kib, side};
    use super::{Existence, merge_semi_join};

    /// What the join's condition is beyond the key.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Condition {
        None,
        /// `l_id < r_id`: the right row comes later on its sorted side.
        Later,
        /// `NOT (r_id <= l_id)`: `Later` written from the right side, and negated.
        NotEarlier,
        /// As `Later`, but NULL (neither true nor false) where `l_id + r_id` divides by 3.
        LaterOrNull,
    }

    impl Condition {
        fn passes(self, l: usize, r: usize) -> bool {
            match self {
                Condition::None => true,
                Condition::Later | Condition::NotEarlier => l < r,
                Condition::LaterOrNull => l < r && !(l + r).is_multiple_of(3),
            }
        }

        fn filter(self) -> Option<JoinFilter> {
            let (l, r): (Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>) =
                (Arc::new(Column::new("l_id", 0)), Arc::new(Column::new("r_id", 1)));
            let later: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(Arc::clone(&l), Operator::Lt, Arc::clone(&r)));
            let expression = match self {
                Condition::None => return None,
                Condition::Later => later,
                Condition::NotEarlier => Arc::new(NotExpr::new(Arc::new(BinaryExpr::new(r, Operator::LtEq, l)))),
                Condition::LaterOrNull => {
                    let sum = Arc::new(BinaryExpr::new(l, Operator::Plus, r));
                    let remainder = Arc::new(BinaryExpr::new(sum, Operator::Modulo, lit(3i64)));
                    let divides = Arc::new(BinaryExpr::new(remainder, Operator::Eq, lit(0i64)));
                    Arc::new(
                        CaseExpr::try_new(None, vec![(divides, lit(ScalarValue::Boolean(None)))], Some(later)).unwrap(),
                    )
                }
            };
            let ids = Schema::new(vec![
                Field::new("l_id", DataType::Int64, false),
                Field::new("r_id", DataType::Int64, false),
            ]);
            let sides =
                vec![ColumnIndex { index: 1, side: JoinSide::Left }, ColumnIndex { index: 1, side: JoinSide::Right }];
            Some(JoinFilter::new(expression, sides, Arc::new(ids)))
        }
    }

    /// The join of the sides' single partitions on their keys.
    fn joined(
        (existence, condition): (Existence, Condition),
        (left, right): (&Arc<dyn ExecutionPlan>, &Arc<dyn ExecutionPlan>),
        batch_size: usize,
        context: Arc<TaskContext>,
    ) -> SendableRecordBatchStream {
        merge_semi_join(
            (existence, condition.filter()),
            (left.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("l_key", 0))),
            (right.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("r_key", 0))),
            left.schema(),
            batch_size,
            (&ExecutionPlanMetricsSet::new(), 0),
            context.memory_pool(),
        )
    }

    /// The ids of the left rows the join keeps (their places on the sorted left side), against
    /// the definition.
    async fn kept((left, right, sizes, batch_size): &Case, existence: Existence, condition: Condition) {
        let (left_plan, left_keys) = side("l", left, sizes.0);
        let (right_plan, right_keys) = side("r", right, sizes.1);
        let matches = |l: usize, key: &Option<i32>| {
            right_keys.iter().enumerate().any(|(r, other)| key.is_some() && key == other && condition.passes(l, r))
        };
        let expected: Vec<i64> = (left_keys.iter().enumerate())
            .filter(|(l, key)| matches(*l, key) == (existence == Existence::Semi))
            .map(|(l, _)| l as i64)
            .collect();
        let context = Arc::new(TaskContext::default());
        let stream = joined((existence, condition), (&left_plan, &right_plan), *batch_size, context);
        let output = collect(stream).await.unwrap();
        let ids: Vec<i64> =
            output.iter().flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec()).collect();
        let case = format!("{existence:?} {condition:?} left {left:?} right {right:?} sizes {sizes:?}");
        assert_eq!(ids, expected, "{case} batch size {batch_size}");
    }

    #[tokio::test]
    async fn keeps_the_left_rows_with_a_passing_match_or_without_one_in_their_order() {
        for case in cases() {
            for existence in [Existence::Semi, Existence::Anti] {
                for condition in [Condition::None, Condition::Later, Condition::NotEarlier, Condition::LaterOrNull] {
                    kept(&case, existence, condition).await;
                }
            }
        }
    }

    /// `l_v <> r_v` over nullable columns, which the join compares value by value: a NULL on
    /// either side fails the pair, as in SQL, whatever batch sizes cut the runs.
    #[tokio::test]
    async fn a_comparison_with_nulls_on_either_side_fails_the_pair() {
        let schema = |prefix: &str| {
            Arc::new(Schema::new(vec![
                Field::new(format!("{prefix}_key"), DataType::Int32, true),
                Field::new(format!("{prefix}_v"), DataType::Int64, true),
            ]))
        };
        // Sorted keys, runs of 1 to 4 rows, and values with NULLs in a pattern of their own.
        let rows = |count: usize, salt: usize| -> Vec<(i32, Option<i64>)> {
            (0..count)
                .map(|row| {
                    ((row / (1 + row % 4)) as i32, (!(row + salt).is_multiple_of(3)).then_some((row % 3) as i64))
                })
                .collect()
        };
        let (mut left_rows, mut right_rows) = (rows(40, 0), rows(50, 1));
        left_rows.sort_by_key(|(key, _)| *key);
        right_rows.sort_by_key(|(key, _)| *key);
        let plan = |prefix: &str, rows: &[(i32, Option<i64>)], size: usize| -> Arc<dyn ExecutionPlan> {
            let batches = rows
                .chunks(size)
                .map(|chunk| {
                    let keys: Int32Array = chunk.iter().map(|(key, _)| Some(*key)).collect();
                    let values: Int64Array = chunk.iter().map(|(_, value)| *value).collect();
                    RecordBatch::try_new(schema(prefix), vec![Arc::new(keys), Arc::new(values)]).unwrap()
                })
                .collect::<Vec<_>>();
            TestMemoryExec::try_new_exec(&[batches], schema(prefix), None).unwrap()
        };
        let differs = Arc::new(BinaryExpr::new(
            Arc::new(Column::new("l_v", 0)),
            Operator::NotEq,
            Arc::new(Column::new("r_v", 1)),
        ));
        let sides =
            vec![ColumnIndex { index: 1, side: JoinSide::Left }, ColumnIndex { index: 1, side: JoinSide::Right }];
        let fields =
            Schema::new(vec![Field::new("l_v", DataType::Int64, true), Field::new("r_v", DataType::Int64, true)]);
        let filter = JoinFilter::new(differs, sides, Arc::new(fields));
        for existence in [Existence::Semi, Existence::Anti] {
            let expected: Vec<(i32, Option<i64>)> = left_rows
                .iter()
                .filter(|(key, value)| {
                    let passes = right_rows
                        .iter()
                        .any(|(other, right)| other == key && matches!((value, right), (Some(l), Some(r)) if l != r));
                    passes == (existence == Existence::Semi)
                })
                .copied()
                .collect();
            for (left_size, right_size) in [(1, 1), (3, 2), (7, 100), (100, 3)] {
                let (left, right) = (plan("l", &left_rows, left_size), plan("r", &right_rows, right_size));
                let context = Arc::new(TaskContext::default());
                let stream = merge_semi_join(
                    (existence, Some(filter.clone())),
                    (left.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("l_key", 0))),
                    (right.execute(0, Arc::clone(&context)).unwrap(), Arc::new(Column::new("r_key", 0))),
                    left.schema(),
                    4,
                    (&ExecutionPlanMetricsSet::new(), 0),
                    context.memory_pool(),
                );
                let kept: Vec<(i32, Option<i64>)> = collect(stream)
                    .await
                    .unwrap()
                    .iter()
                    .flat_map(|batch| {
                        let keys = batch.column(0).as_primitive::<Int32Type>().clone();
                        let values = batch.column(1).as_primitive::<Int64Type>().clone();
                        (0..batch.num_rows())
                            .map(move |row| (keys.value(row), values.is_valid(row).then(|| values.value(row))))
                    })
                    .collect();
                assert_eq!(kept, expected, "{existence:?}, batches of {left_size} and {right_size}");
            }
        }
    }

    /// A key on the right with more rows than memory holds: without a condition only the key
    /// matters, and the join keeps its left rows (as Spark's semi join buffers one matching
    /// row); with one, the rows are held to be paired, and the query fails.
    #[tokio::test]
    async fn a_right_key_past_memory_fails_only_under_a_condition() {
        for condition in [Condition::None, Condition::Later] {
            let (left, _) = side("l", &[Some(4); 3], &[1]);
            let (right, _) = side("r", &[Some(4); 5000], &[100]);
            let stream = joined((Existence::Semi, condition), (&left, &right), 1024, context_of_64_kib());
            match (condition, collect(stream).await) {
                (Condition::None, Ok(batches)) => assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3),
                (Condition::Later, Err(error)) => assert!(error.to_string().contains("Resources exhausted"), "{error}"),
                (condition, other) => panic!("{condition:?}: {:?}", other.map(|b| b.len())),
            }
        }
    }
}
