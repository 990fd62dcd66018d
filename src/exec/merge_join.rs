//! The merge loop of Spark's `SortMergeJoin` in its commonest form: an inner join on one key
//! of an integral, date or timestamp type, with no condition beyond the key (the join of two
//! tables bucketed by that key). Its sides and the stream around the loop also serve the
//! semi and anti joins' loop (`merge_semi_join`).
//!
//! Spark's `SortMergeJoinScanner` walks both sorted sides, buffers the right side's rows of the
//! current key and pairs each left row with them. This loop does the same over the keys
//! normalized to integers (`exec::sort`), finding each side's run of equal keys without a
//! comparison call per row, and gathers the paired rows' columns a batch at a time. A run of
//! equal keys may span batches; a very large run pair is emitted in batches, never at once.
//! Other sort-merge joins run on DataFusion's.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{SortOptions, interleave_record_batch, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

use super::join_spec::{JoinSpec, JoinStrategy};
use super::sort::{NormalizedKey, normalizable, normalize};

/// Whether `spec` joining sides of these schemas runs on this loop.
pub(super) fn applies(spec: &JoinSpec, left: &SchemaRef, right: &SchemaRef) -> bool {
    let [(left_key, right_key)] = spec.on.as_slice() else { return false };
    let (Ok(left_type), Ok(right_type)) = (left_key.data_type(left), right_key.data_type(right)) else {
        return false;
    };
    let supported_type = match spec.join_type {
        JoinType::Inner => spec.filter.is_none(),
        JoinType::LeftSemi | JoinType::LeftAnti => true,
        _ => false,
    };
    spec.strategy == JoinStrategy::SortMerge
        && supported_type
        && spec.null_equality == NullEquality::NullEqualsNothing
        && left_type == right_type
        && integral(&left_type)
}

/// Types whose equal values normalize to equal integers (floats do not: -0.0 and NaN).
fn integral(data_type: &DataType) -> bool {
    !data_type.is_floating() && normalizable(data_type)
}

/// One partition of the join: left columns, then right columns, as `schema` has them.
pub(super) fn merge_inner_join(
    left: SendableRecordBatchStream,
    right: SendableRecordBatchStream,
    (left_key, right_key): (Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>),
    schema: SchemaRef,
    batch_size: usize,
    metrics: (&ExecutionPlanMetricsSet, usize),
    pool: &Arc<dyn MemoryPool>,
) -> SendableRecordBatchStream {
    let (left, right) = Side::pair((left, left_key), (right, right_key), metrics.1, pool);
    let join = MergeJoin {
        left,
        right,
        left_run: None,
        right_run: None,
        pending: None,
        output: Output::default(),
        schema: Arc::clone(&schema),
        batch_size: batch_size.max(1),
    };
    merge_stream(join, schema, metrics)
}

/// A merge loop over two sorted sides, giving one output batch at a time.
pub(super) trait MergeLoop: Send + 'static {
    fn sides(&self) -> [&Side; 2];

    fn next_batch(&mut self) -> impl Future<Output = Result<Option<RecordBatch>>> + Send;
}

/// The stream of a merge loop's batches, its `join_time` leaving out the time spent waiting
/// for its inputs.
pub(super) fn merge_stream(
    join: impl MergeLoop,
    schema: SchemaRef,
    (set, partition): (&ExecutionPlanMetricsSet, usize),
) -> SendableRecordBatchStream {
    let metrics = (MetricBuilder::new(set).subset_time("join_time", partition), BaselineMetrics::new(set, partition));
    let stream = futures::stream::unfold((Some(join), metrics), |(join, (join_time, baseline))| async move {
        let mut join = join?;
        let started = Instant::now();
        let before = waited_for_inputs(join.sides());
        let next = join.next_batch().await;
        join_time.add_duration(started.elapsed().saturating_sub(waited_for_inputs(join.sides()) - before));
        let (item, join) = match next {
            Ok(Some(batch)) => {
                baseline.record_output(batch.num_rows());
                (Ok(batch), Some(join))
            }
            Ok(None) => return None,
            Err(error) => (Err(error), None),
        };
        Some((item, (join, (join_time, baseline))))
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

fn waited_for_inputs(sides: [&Side; 2]) -> Duration {
    sides.iter().map(|side| side.waited).sum()
}

/// A batch of one side with its keys normalized.
pub(super) struct Source {
    pub(super) batch: RecordBatch,
    pub(super) keys: NormalizedKey,
}

/// Rows `start..end` of a source.
#[derive(Clone)]
pub(super) struct Segment {
    pub(super) source: Arc<Source>,
    start: usize,
    end: usize,
}

/// A side's run of rows sharing one key: one segment, and more only if the run crosses
/// batches.
#[derive(Clone)]
pub(super) struct Run {
    pub(super) key: u64,
    first: Segment,
    more: Vec<Segment>,
    pub(super) rows: usize,
}

impl Segment {
    pub(super) fn rows(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

impl Run {
    pub(super) fn segments(&self) -> impl Iterator<Item = &Segment> {
        std::iter::once(&self.first).chain(&self.more)
    }

    /// The segment and row of the run's `index`-th row.
    pub(super) fn row(&self, mut index: usize) -> (&Segment, usize) {
        for segment in self.segments() {
            let rows = segment.rows();
            if index < rows.len() {
                return (segment, rows.start + index);
            }
            index -= rows.len();
        }
        unreachable!("a row index within the run")
    }
}

pub(super) struct Side {
    input: SendableRecordBatchStream,
    key: Arc<dyn PhysicalExpr>,
    /// Time spent waiting for this side's input, which the join's time leaves out.
    waited: Duration,
    /// The batches a run holds beyond its first: a key with more rows than memory allows
    /// fails the query (53200) instead of taking the process's memory.
    reservation: MemoryReservation,
    pub(super) current: Option<Arc<Source>>,
    /// The first row of `current` not yet taken.
    pub(super) row: usize,
    exhausted: bool,
}

impl Side {
    /// The left and right sides of partition `partition`'s join, each with its key.
    pub(super) fn pair(
        left: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
        right: (SendableRecordBatchStream, Arc<dyn PhysicalExpr>),
        partition: usize,
        pool: &Arc<dyn MemoryPool>,
    ) -> (Side, Side) {
        let side = |(input, key), name: &str| {
            let reservation = MemoryConsumer::new(format!("SortMergeJoin[{partition}] {name} run")).register(pool);
            Side { input, key, waited: Duration::ZERO, reservation, current: None, row: 0, exhausted: false }
        };
        (side(left, "left"), side(right, "right"))
    }

    /// Makes `current` a batch with rows left, if the input has one.
    pub(super) async fn ensure_rows(&mut self) -> Result<bool> {
        while self.current.as_ref().is_none_or(|c| self.row >= c.batch.num_rows()) {
            if self.exhausted {
                return Ok(false);
            }
            let asked = Instant::now();
            let next = self.input.next().await.transpose()?;
            self.waited += asked.elapsed();
            match next {
                Some(batch) => {
                    let values = self.key.evaluate(&batch)?.into_array(batch.num_rows())?;
                    let keys = normalize(&values, SortOptions::default()).expect("an integral key");
                    self.current = Some(Arc::new(Source { batch, keys }));
                    self.row = 0;
                }
                None => {
                    self.exhausted = true;
                    self.current = None;
                }
            }
        }
        Ok(true)
    }

    /// The run of `key` where the current batch holds it whole, passing the rows of smaller
    /// keys: `Some(None)` where the batch shows there is none. `None` where only later
    /// batches can tell, which `next_run` then finds.
    pub(super) fn run_within_batch(&mut self, key: u64) -> Option<Option<Run>> {
        let source = self.current.as_ref()?;
        let (keys, values) = (&source.keys, source.keys.values());
        let start = (self.row..values.len()).find(|&r| !keys.is_null(r) && values[r] >= key);
        let Some(start) = start else {
            self.row = values.len();
            return None;
        };
        self.row = start;
        if values[start] > key {
            return Some(None);
        }
        let end = (start + 1..values.len()).find(|&r| values[r] != key || keys.is_null(r))?;
        self.row = end;
        let first = Segment { source: Arc::clone(source), start, end };
        // The run this one replaces, if it crossed batches, is done with.
        self.reservation.free();
        Some(Some(Run { key, first, more: Vec::new(), rows: end - start }))
    }

    /// The next run of rows with a non-null key, which may continue into later batches. Only
    /// with `all_rows` does it hold the rows past its first batch; without, it stands for the
    /// key alone, as a semi join without a condition needs, however many rows have it.
    pub(super) async fn next_run(&mut self, all_rows: bool) -> Result<Option<Run>> {
        self.reservation.free();
        loop {
            if !self.ensure_rows().await? {
                return Ok(None);
            }
            let mut source = Arc::clone(self.current.as_ref().expect("rows left"));
            if source.keys.is_null(self.row) {
                self.row += 1;
                continue;
            }
            let key = source.keys.values()[self.row];
            let mut run: Option<Run> = None;
            loop {
                let values = &source.keys.values()[self.row..];
                let len = if source.keys.has_nulls() {
                    let ends = |(i, v): (usize, &u64)| *v != key || source.keys.is_null(self.row + i);
                    values.iter().enumerate().position(ends).unwrap_or(values.len())
                } else {
                    values.iter().position(|v| *v != key).unwrap_or(values.len())
                };
                let segment = Segment { source: Arc::clone(&source), start: self.row, end: self.row + len };
                match &mut run {
                    None => run = Some(Run { key, first: segment, more: Vec::new(), rows: len }),
                    Some(run) if all_rows => {
                        self.reservation.try_grow(segment.source.batch.get_array_memory_size())?;
                        run.more.push(segment);
                        run.rows += len;
                    }
                    Some(_) => {}
                }
                self.row += len;
                if self.row < source.batch.num_rows() || !self.ensure_rows().await? {
                    return Ok(run);
                }
                source = Arc::clone(self.current.as_ref().expect("rows left"));
                if source.keys.is_null(self.row) || source.keys.values()[self.row] != key {
                    return Ok(run);
                }
            }
        }
    }
}

/// The pairing of two runs with the same key, emitted from the `next`-th pair on.
struct Pairing {
    left: Run,
    right: Run,
    next: usize,
}

/// Pairs waiting to be gathered into one output batch, each side's rows by (source, row).
#[derive(Default)]
struct Output {
    left_sources: Vec<Arc<Source>>,
    right_sources: Vec<Arc<Source>>,
    left_rows: Vec<(usize, usize)>,
    right_rows: Vec<(usize, usize)>,
}

/// The index of `source` in `sources`, added if new; runs cross few batches, so the search
/// looks only at the last ones.
pub(super) fn source_index(sources: &mut Vec<Arc<Source>>, source: &Arc<Source>) -> usize {
    if let Some(found) = sources.iter().rev().take(4).position(|s| Arc::ptr_eq(s, source)) {
        return sources.len() - 1 - found;
    }
    sources.push(Arc::clone(source));
    sources.len() - 1
}

impl Output {
    fn len(&self) -> usize {
        self.left_rows.len()
    }

    /// Pairs the rows `left_rows` of `left` with one right row.
    fn push(&mut self, left: &Arc<Source>, left_rows: Range<usize>, (right, right_row): (&Arc<Source>, usize)) {
        let l = source_index(&mut self.left_sources, left);
        let r = source_index(&mut self.right_sources, right);
        let len = left_rows.len();
        self.left_rows.extend(left_rows.map(|row| (l, row)));
        self.right_rows.extend(std::iter::repeat_n((r, right_row), len));
    }

    fn gather(&mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        let side = |sources: &[Arc<Source>], rows: &[(usize, usize)]| match sources {
            // Most output batches read one batch of a side, whose rows a `take` gathers
            // faster than `interleave` picks them from several.
            [source] => take_record_batch(
                &source.batch,
                &UInt32Array::from_iter_values(rows.iter().map(|(_, row)| *row as u32)),
            ),
            _ => {
                let batches: Vec<&RecordBatch> = sources.iter().map(|s| &s.batch).collect();
                interleave_record_batch(&batches, rows)
            }
        };
        let left = side(&self.left_sources, &self.left_rows)?;
        let right = side(&self.right_sources, &self.right_rows)?;
        let columns = left.columns().iter().chain(right.columns()).cloned().collect();
        *self = Output::default();
        Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
    }
}

struct MergeJoin {
    left: Side,
    right: Side,
    /// Each side's next run, until it is paired or passed.
    left_run: Option<Run>,
    right_run: Option<Run>,
    pending: Option<Pairing>,
    output: Output,
    schema: SchemaRef,
    batch_size: usize,
}

impl MergeLoop for MergeJoin {
    fn sides(&self) -> [&Side; 2] {
        [&self.left, &self.right]
    }

    async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(pairing) = &mut self.pending {
                // Right row by right row, each paired with a stretch of the left run's rows.
                let total = pairing.left.rows * pairing.right.rows;
                while pairing.next < total && self.output.len() < self.batch_size {
                    let (r, l) = (pairing.next / pairing.left.rows, pairing.next % pairing.left.rows);
                    let (left, start) = pairing.left.row(l);
                    let len = (left.end - start).min(self.batch_size - self.output.len());
                    let (right, right_row) = pairing.right.row(r);
                    self.output.push(&left.source, start..start + len, (&right.source, right_row));
                    pairing.next += len;
                }
                if pairing.next == total {
                    self.pending = None;
                }
            }
            if self.pending.is_none() && self.left_run.is_none() && self.right_run.is_none() {
                self.merge_within_batches();
            }
            if self.output.len() >= self.batch_size {
                return self.emit().map(Some);
            }
            if self.left_run.is_none() {
                self.left_run = self.left.next_run(true).await?;
            }
            // Once the left side is done no right row joins: the right side is left unread,
            // a sort below it never sorting, as Spark's join leaves its buffered side.
            if self.left_run.is_some() && self.right_run.is_none() {
                self.right_run = self.right.next_run(true).await?;
            }
            let (Some(l), Some(r)) = (&self.left_run, &self.right_run) else {
                return if self.output.len() > 0 { self.emit().map(Some) } else { Ok(None) };
            };
            match l.key.cmp(&r.key) {
                Ordering::Less => self.left_run = None,
                Ordering::Greater => self.right_run = None,
                Ordering::Equal => {
                    let left = self.left_run.take().expect("matched");
                    let right = self.right_run.take().expect("matched");
                    self.pending = Some(Pairing { left, right, next: 0 });
                }
            }
        }
    }
}

impl MergeJoin {
    /// Pairs the runs that lie wholly within both sides' current batches, without making a
    /// run of each: the loop most rows go through. It stops at a run that may go on in the
    /// next batch, at nulls, at a pairing larger than the batch has room for, and when the
    /// batch is full; `next_run` takes it from there.
    fn merge_within_batches(&mut self) {
        let (Some(left), Some(right)) = (self.left.current.clone(), self.right.current.clone()) else { return };
        if left.keys.has_nulls() || right.keys.has_nulls() {
            return;
        }
        let (left_keys, right_keys) = (left.keys.values(), right.keys.values());
        let (mut i, mut j) = (self.left.row, self.right.row);
        while i < left_keys.len() && j < right_keys.len() && self.output.len() < self.batch_size {
            let key = left_keys[i];
            match key.cmp(&right_keys[j]) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    let run_end =
                        |keys: &[u64], from: usize| keys[from..].iter().position(|k| *k != key).map(|len| from + len);
                    let (Some(left_end), Some(right_end)) = (run_end(left_keys, i), run_end(right_keys, j)) else {
                        break;
                    };
                    if (left_end - i) * (right_end - j) > self.batch_size - self.output.len() {
                        break;
                    }
                    for row in j..right_end {
                        self.output.push(&left, i..left_end, (&right, row));
                    }
                    (i, j) = (left_end, right_end);
                }
            }
        }
        (self.left.row, self.right.row) = (i, j);
    }

    fn emit(&mut self) -> Result<RecordBatch> {
        self.output.gather(&self.schema)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, SchemaRef};
    use datafusion::execution::TaskContext;
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::ExecutionPlan;
    use datafusion::physical_plan::common::collect;
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
    use datafusion::physical_plan::test::TestMemoryExec;

    use super::merge_inner_join;

    pub(in crate::exec) fn side_schema(prefix: &str) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(format!("{prefix}_key"), DataType::Int32, true),
            Field::new(format!("{prefix}_id"), DataType::Int64, false),
        ]))
    }

    /// A sorted side (nulls first) cut into batches of the given sizes; ids count rows.
    pub(in crate::exec) fn side(
        prefix: &str,
        keys: &[Option<i32>],
        sizes: &[usize],
    ) -> (Arc<dyn ExecutionPlan>, Vec<Option<i32>>) {
        let mut keys = keys.to_vec();
        keys.sort();
        let mut batches = Vec::new();
        let mut start = 0;
        for size in sizes.iter().cycle() {
            if start >= keys.len() {
                break;
            }
            let end = (start + size).min(keys.len());
            let key: Int32Array = keys[start..end].iter().copied().collect();
            let id: Int64Array = (start as i64..end as i64).collect();
            batches.push(RecordBatch::try_new(side_schema(prefix), vec![Arc::new(key), Arc::new(id)]).unwrap());
            start = end;
        }
        (TestMemoryExec::try_new_exec(&[batches], side_schema(prefix), None).unwrap(), keys)
    }

    async fn joined(left: &[Option<i32>], right: &[Option<i32>], sizes: (&[usize], &[usize]), batch_size: usize) {
        let (left_plan, left_keys) = side("l", left, sizes.0);
        let (right_plan, right_keys) = side("r", right, sizes.1);
        let mut expected = Vec::new();
        for (l, lk) in left_keys.iter().enumerate() {
            for (r, rk) in right_keys.iter().enumerate() {
                if lk.is_some() && lk == rk {
                    expected.push((l as i64, r as i64));
                }
            }
        }
        let fields: Vec<Field> =
            side_schema("l").fields().iter().chain(side_schema("r").fields()).map(|f| f.as_ref().clone()).collect();
        let schema = Arc::new(Schema::new(fields));
        let context = Arc::new(TaskContext::default());
        let keys = (Arc::new(Column::new("l_key", 0)) as _, Arc::new(Column::new("r_key", 0)) as _);
        let pool = Arc::clone(context.memory_pool());
        let metrics = ExecutionPlanMetricsSet::new();
        let stream = merge_inner_join(
            left_plan.execute(0, Arc::clone(&context)).unwrap(),
            right_plan.execute(0, context).unwrap(),
            keys,
            schema,
            batch_size,
            (&metrics, 0),
            &pool,
        );
        let output = collect(stream).await.unwrap();
        assert!(output.iter().all(|b| b.num_rows() <= batch_size));
        let mut pairs = Vec::new();
        let mut last_key = i32::MIN;
        for batch in &output {
            let (lk, rk) = (batch.column(0).as_primitive::<Int32Type>(), batch.column(2).as_primitive::<Int32Type>());
            let (li, ri) = (batch.column(1).as_primitive::<Int64Type>(), batch.column(3).as_primitive::<Int64Type>());
            for row in 0..batch.num_rows() {
                assert!(!lk.is_null(row) && lk.value(row) == rk.value(row), "keys match");
                assert!(lk.value(row) >= last_key, "output in key order");
                last_key = lk.value(row);
                pairs.push((li.value(row), ri.value(row)));
            }
        }
        pairs.sort();
        assert_eq!(pairs, expected, "left {left:?} right {right:?} sizes {sizes:?} batch size {batch_size}");
    }

    /// The sides' keys, their batch sizes and the output batch size of one case.
    pub(in crate::exec) type Case = (Vec<Option<i32>>, Vec<Option<i32>>, (&'static [usize], &'static [usize]), usize);

    /// Random sides of a few keys each (half of them without nulls, which the loop within
    /// batches takes), cut into batches of one row, a few rows and many rows; then one key
    /// on both sides, an empty side on either and nulls alone.
    pub(in crate::exec) fn cases() -> Vec<Case> {
        let mut state = 7u64;
        let mut random = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let sizes: [&'static [usize]; 3] = [&[1], &[3, 7], &[64]];
        let mut cases = Vec::new();
        for case in 0..80 {
            let range = [3, 10, 50][case % 3];
            let mut draw = |rows: u64| -> Vec<Option<i32>> {
                (0..random(rows) + 1)
                    .map(|_| (case % 2 == 0 || random(8) != 0).then(|| random(range) as i32 - 2))
                    .collect()
            };
            let (left, right) = (draw(60), draw(40));
            cases.push((left, right, (sizes[case % 3], sizes[(case / 3) % 3]), [1, 5, 1024][(case / 9) % 3]));
        }
        cases.push((vec![Some(1); 30], vec![Some(1); 25], (&[4], &[6]), 7));
        cases.push((vec![], vec![Some(1)], (&[4], &[6]), 7));
        cases.push((vec![Some(1), None], vec![], (&[4], &[6]), 7));
        cases.push((vec![None, None], vec![None], (&[1], &[1]), 7));
        cases
    }

    #[tokio::test]
    async fn pairs_every_matching_row_across_batches_and_skips_nulls() {
        for (left, right, sizes, batch_size) in cases() {
            joined(&left, &right, sizes, batch_size).await;
        }
    }

    /// A task whose memory pool holds 64 KiB: less than a run of thousands of rows.
    pub(in crate::exec) fn context_of_64_kib() -> Arc<TaskContext> {
        let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_limit(64 << 10, 1.0)
            .build_arc()
            .unwrap();
        Arc::new(TaskContext::default().with_runtime(runtime))
    }

    #[tokio::test]
    async fn a_key_with_more_rows_than_memory_allows_fails_the_query() {
        let (left, _) = side("l", &[Some(4); 5000], &[100]);
        let (right, _) = side("r", &[Some(4); 3], &[1]);
        let context = context_of_64_kib();
        let fields: Vec<Field> =
            side_schema("l").fields().iter().chain(side_schema("r").fields()).map(|f| f.as_ref().clone()).collect();
        let keys = (Arc::new(Column::new("l_key", 0)) as _, Arc::new(Column::new("r_key", 0)) as _);
        let stream = merge_inner_join(
            left.execute(0, Arc::clone(&context)).unwrap(),
            right.execute(0, Arc::clone(&context)).unwrap(),
            keys,
            Arc::new(Schema::new(fields)),
            1024,
            (&ExecutionPlanMetricsSet::new(), 0),
            context.memory_pool(),
        );
        let error = collect(stream).await.unwrap_err();
        assert!(error.to_string().contains("Resources exhausted"), "{error}");
    }
}
