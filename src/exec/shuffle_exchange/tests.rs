//! The exchange run for real: rows reach their Spark partition once, in memory or spilled,
//! with few descriptors; reads by spec, statistics, errors and cancellation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, Decimal256Array, DictionaryArray, Float32Array,
    Int8Array, Int16Array, Int64Array, IntervalMonthDayNanoArray, LargeBinaryArray, RecordBatch, RecordBatchOptions,
    StringArray, StringViewArray, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, sort_to_indices, take_record_batch};
use datafusion::arrow::datatypes::{
    DataType, Field, Int32Type, Int64Type, IntervalMonthDayNano, Schema, SchemaRef, i256,
};
use datafusion::error::DataFusionError;
use datafusion::execution::config::SessionConfig;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::common::collect;
use datafusion::physical_plan::test::TestMemoryExec;
use datafusion::physical_plan::test::exec::{BlockingExec, MockExec, assert_strong_count_converges_to_zero};
use futures::{FutureExt, StreamExt};

use super::{ExchangePartitioning, ShuffleExchangeExec, ShuffleReadSpec, map_output, spill};
use crate::storage::bucket_hash::bucket_ids;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("v", DataType::Int64, false)]))
}

/// The first key of map task `map`'s input: keys count up from 0 over all of them.
fn first_key(map: usize, batches: usize, rows: usize) -> i64 {
    (map * batches * rows) as i64
}

/// `maps` input partitions of `batches` batches of `rows` rows, `k` counting up, `v = -k`.
fn input(maps: usize, batches: usize, rows: usize) -> Arc<dyn ExecutionPlan> {
    let partitions: Vec<Vec<RecordBatch>> = (0..maps)
        .map(|map| {
            (0..batches)
                .map(|b| {
                    let start = first_key(map, batches, rows) + (b * rows) as i64;
                    let k: Int64Array = (start..start + rows as i64).collect();
                    let v: Int64Array = (start..start + rows as i64).map(|k| -k).collect();
                    RecordBatch::try_new(schema(), vec![Arc::new(k), Arc::new(v)]).unwrap()
                })
                .collect()
        })
        .collect();
    TestMemoryExec::try_new_exec(&partitions, schema(), None).unwrap()
}

fn hash(input: Arc<dyn ExecutionPlan>, partitions: usize) -> ShuffleExchangeExec {
    ShuffleExchangeExec::new(input, ExchangePartitioning::Hash(vec![Arc::new(Column::new("k", 0))], partitions), None)
}

fn context(memory_limit: Option<usize>) -> Arc<TaskContext> {
    let runtime = match memory_limit {
        Some(limit) => RuntimeEnvBuilder::new().with_memory_limit(limit, 1.0),
        None => RuntimeEnvBuilder::new(),
    };
    Arc::new(TaskContext::default().with_runtime(runtime.build_arc().unwrap()))
}

/// The Spark partition of each key, out of `partitions`.
fn partition_of(keys: &[i64], partitions: usize) -> Vec<usize> {
    let ids = bucket_ids(&[Arc::new(Int64Array::from(keys.to_vec()))], keys.len(), partitions as u32).unwrap();
    ids.into_iter().map(|id| id as usize).collect()
}

/// Sorted keys each map task sends to each partition.
fn expected(maps: usize, batches: usize, rows: usize, partitions: usize) -> HashMap<(usize, usize), Vec<i64>> {
    let mut parts: HashMap<(usize, usize), Vec<i64>> = HashMap::new();
    for map in 0..maps {
        let first = first_key(map, batches, rows);
        let keys: Vec<i64> = (first..first + (batches * rows) as i64).collect();
        for (key, partition) in keys.iter().zip(partition_of(&keys, partitions)) {
            parts.entry((map, partition)).or_default().push(*key);
        }
    }
    parts
}

fn expected_keys(
    expected: &HashMap<(usize, usize), Vec<i64>>,
    parts: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<i64> {
    let mut keys: Vec<i64> =
        parts.into_iter().flat_map(|part| expected.get(&part).cloned().unwrap_or_default()).collect();
    keys.sort_unstable();
    keys
}

/// The sorted keys of a stream, each row checked to be whole (`v = -k`).
async fn keys(stream: SendableRecordBatchStream) -> Vec<i64> {
    let mut keys = Vec::new();
    for batch in collect(stream).await.unwrap() {
        let (k, v) = (batch.column(0).as_primitive::<Int64Type>(), batch.column(1).as_primitive::<Int64Type>());
        assert!(k.values().iter().zip(v.values()).all(|(k, v)| *k == -v));
        keys.extend(k.values());
    }
    keys.sort_unstable();
    keys
}

fn metric(exchange: &ShuffleExchangeExec, name: &str) -> usize {
    exchange.metrics().unwrap().sum_by_name(name).map_or(0, |v| v.as_usize())
}

fn spills(exchange: &ShuffleExchangeExec) -> usize {
    exchange.metrics().unwrap().spill_count().unwrap_or(0)
}

#[tokio::test]
async fn rows_reach_their_spark_partition_and_spill_past_the_budget() {
    let context = context(Some(64 * 1024));
    let exchange = hash(input(2, 10, 1000), 4);
    let mut seen = 0;
    for partition in 0..4 {
        let batches = collect(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.unwrap();
        for batch in batches {
            let ids = bucket_ids(&[Arc::clone(batch.column(0))], batch.num_rows(), 4).unwrap();
            assert!(ids.iter().all(|id| *id as usize == partition));
            seen += batch.num_rows();
        }
    }
    assert_eq!(seen, 20_000);
    let metrics = exchange.metrics().unwrap();
    assert!(metrics.spill_count().unwrap_or(0) > 0, "{metrics:?}");
    assert_eq!(context.memory_pool().reserved(), 0, "every reservation is released once read");
    assert_eq!(
        context.runtime_env().disk_manager.spilling_progress().active_files_count,
        0,
        "spill files go once read"
    );
}

#[tokio::test]
async fn spilling_under_a_tiny_memory_limit_returns_the_same_rows() {
    let (in_memory, spilled) = (hash(input(3, 8, 700), 5), hash(input(3, 8, 700), 5));
    let (roomy, tight) = (context(None), context(Some(32 * 1024)));
    for partition in 0..5 {
        let expected = keys(in_memory.execute(partition, Arc::clone(&roomy)).unwrap()).await;
        assert_eq!(
            keys(spilled.execute(partition, Arc::clone(&tight)).unwrap()).await,
            expected,
            "partition {partition}"
        );
    }
    assert_eq!(spills(&in_memory), 0);
    assert!(spills(&spilled) > 0);
    assert!((1..=3).contains(&metric(&spilled, "spill_files")), "one spill file per map task at most");
    assert_eq!(tight.memory_pool().reserved(), 0);
}

#[tokio::test]
async fn map_outputs_leave_half_of_a_bounded_pool_to_the_operators_above() {
    // 4 map tasks of 1M rows of 16 bytes: 64 MB, which a 96 MiB pool would hold whole.
    let (maps, batches, rows, partitions) = (4, 10, 100_000, 4);
    let limit = 96 << 20;
    let (context, exchange) = (context(Some(limit)), hash(input(maps, batches, rows), partitions));
    exchange.materialize(Arc::clone(&context)).await.unwrap();
    // Without the rule nothing would spill; a task may keep a remainder too small for a run.
    let held = context.memory_pool().reserved();
    assert!(held <= limit / 2 + map_output::LEAST_RUN_BYTES, "map outputs hold {held} bytes of a {limit}-byte pool");
    assert!(spills(&exchange) > 0);
    let expected = expected(maps, batches, rows, partitions);
    for partition in 0..partitions {
        let read = keys(exchange.execute(partition, Arc::clone(&context)).unwrap()).await;
        assert_eq!(read, expected_keys(&expected, (0..maps).map(|map| (map, partition))), "partition {partition}");
    }
    assert_eq!(context.memory_pool().reserved(), 0);
}

/// Descriptors this process has open.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |entries| entries.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_partitions_under_a_small_memory_limit_keep_descriptors_few() {
    const MAPS: usize = 4;
    const PARTITIONS: usize = 200;
    let (batches, rows) = (32, 8192);
    let total = MAPS * batches * rows;
    let context = context(Some(256 * 1024));
    let disk = Arc::clone(&context.runtime_env().disk_manager);
    let baseline = open_descriptors();
    let (stop, most_descriptors, most_files) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let sampler = {
        let (stop, most_descriptors, most_files, disk) =
            (Arc::clone(&stop), Arc::clone(&most_descriptors), Arc::clone(&most_files), Arc::clone(&disk));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                most_descriptors.fetch_max(open_descriptors(), Ordering::Relaxed);
                most_files.fetch_max(disk.spilling_progress().active_files_count, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let exchange = hash(input(MAPS, batches, rows), PARTITIONS);
    let statistics = exchange.materialize(Arc::clone(&context)).await.unwrap();
    let after_map_side = open_descriptors();
    let reads = (0..PARTITIONS).map(|partition| {
        let stream = exchange.execute(partition, Arc::clone(&context)).unwrap();
        async move { (partition, collect(stream).await.unwrap()) }
    });
    let mut seen = vec![false; total];
    for (partition, batches) in futures::future::join_all(reads).await {
        for batch in batches {
            let keys = batch.column(0).as_primitive::<Int64Type>().values().to_vec();
            assert!(partition_of(&keys, PARTITIONS).iter().all(|p| *p == partition));
            for key in keys {
                assert!(!std::mem::replace(&mut seen[key as usize], true), "key {key} arrived twice");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    assert!(seen.iter().all(|s| *s), "every row arrives");
    assert_eq!(statistics.total_rows(), total as u64);
    let (spills, files) = (spills(&exchange), metric(&exchange, "spill_files"));
    // Held open at most: one spill file per map task; while a run is written, the writer's
    // handle on it; while reading, the files `CONCURRENT_READS` reads have open; and what the
    // test harness itself opens meanwhile.
    let bound = 2 * MAPS + spill::CONCURRENT_READS + 32;
    let most = most_descriptors.load(Ordering::Relaxed);
    eprintln!(
        "{total} rows, {PARTITIONS} partitions: {spills} spill runs in {files} files; descriptors {baseline} before, \
         at most {most}, {after_map_side} after the map side, {} at the end",
        open_descriptors()
    );
    assert!(spills > bound, "{spills} runs: a file per run would have needed more descriptors than {bound}");
    assert!(most <= baseline + bound, "{most} descriptors open, {baseline} before");
    assert!(files <= MAPS && most_files.load(Ordering::Relaxed) <= MAPS, "one spill file per map task");
    assert_eq!(disk.spilling_progress().active_files_count, 0, "every spill file deleted once read");
    assert_eq!(context.memory_pool().reserved(), 0);
}

#[tokio::test]
async fn a_spilled_segment_larger_than_one_read_comes_back_whole() {
    let (batches, rows) = (64, 8192);
    let context = context(Some(6 << 20));
    let exchange = ShuffleExchangeExec::new(input(1, batches, rows), ExchangePartitioning::Single, None);
    let keys = keys(exchange.execute(0, Arc::clone(&context)).unwrap()).await;
    assert_eq!(keys, (0..(batches * rows) as i64).collect::<Vec<_>>());
    let metrics = exchange.metrics().unwrap();
    let (runs, spilled) = (metrics.spill_count().unwrap_or(0), metrics.spilled_bytes().unwrap_or(0));
    assert!(runs > 0 && spilled / runs > spill::READ_BUDGET as usize, "{runs} runs of {spilled} bytes");
}

#[tokio::test]
async fn reads_by_spec_return_exactly_their_part() {
    let (maps, batches, rows, partitions) = (3, 4, 500, 5);
    let expected = expected(maps, batches, rows, partitions);
    for limit in [None, Some(32 * 1024)] {
        let context = context(limit);
        let exchange = hash(input(maps, batches, rows), partitions);
        let coalesced = exchange.read(ShuffleReadSpec::Partitions(1..3), Arc::clone(&context)).unwrap();
        let want = expected_keys(&expected, (1..3).flat_map(|p| (0..maps).map(move |m| (m, p))));
        assert_eq!(keys(coalesced).await, want, "{limit:?}");

        let mut pieces = Vec::new();
        for maps in [0..1, 1..3] {
            let spec = ShuffleReadSpec::PartialReducer { partition: 0, maps: maps.clone() };
            let piece = keys(exchange.read(spec, Arc::clone(&context)).unwrap()).await;
            assert_eq!(piece, expected_keys(&expected, maps.map(|m| (m, 0))));
            pieces.extend(piece);
        }
        pieces.sort_unstable();
        let whole = hash(input(maps, batches, rows), partitions);
        assert_eq!(
            pieces,
            keys(whole.execute(0, Arc::clone(&context)).unwrap()).await,
            "the pieces make the partition"
        );

        let local =
            exchange.read(ShuffleReadSpec::PartialMapper { map: 2, partitions: 3..5 }, Arc::clone(&context)).unwrap();
        assert_eq!(keys(local).await, expected_keys(&expected, (3..5).map(|p| (2, p))));
        let rest =
            exchange.read(ShuffleReadSpec::PartialMapper { map: 1, partitions: 3..4 }, Arc::clone(&context)).unwrap();
        assert_eq!(keys(rest).await, expected_keys(&expected, [(1, 3)]));

        for spec in [ShuffleReadSpec::Partitions(3..4), ShuffleReadSpec::PartialReducer { partition: 0, maps: 2..3 }] {
            let twice = exchange.read(spec, Arc::clone(&context)).err().expect("a part is read once");
            assert!(matches!(twice, DataFusionError::Internal(_)), "{twice}");
        }
        let out_of_range =
            exchange.read(ShuffleReadSpec::Partitions(4..6), Arc::clone(&context)).err().expect("out of range");
        assert!(matches!(out_of_range, DataFusionError::Internal(_)), "{out_of_range}");
        drop((exchange, whole));
        assert_eq!(context.memory_pool().reserved(), 0, "unread parts are released with the plan");
        assert_eq!(context.runtime_env().disk_manager.spilling_progress().active_files_count, 0);
    }
}

#[tokio::test]
async fn statistics_add_up_to_the_rows_shuffled() {
    let (maps, batches, rows, partitions) = (3, 6, 600, 7);
    let expected = expected(maps, batches, rows, partitions);
    let context = context(Some(48 * 1024));
    let exchange = hash(input(maps, batches, rows), partitions);
    let (first, second) = (exchange.materialize(Arc::clone(&context)), exchange.materialize(Arc::clone(&context)));
    fn sendable<T: Send>(future: T) -> T {
        future
    }
    let (first, second) = futures::future::join(sendable(first), second).await;
    let statistics = first.unwrap();
    assert!(Arc::ptr_eq(&statistics, &second.unwrap()), "one run of the map side");
    assert!(spills(&exchange) > 0);
    assert_eq!((statistics.map_count(), statistics.partition_count()), (maps, partitions));
    for map in 0..maps {
        for partition in 0..partitions {
            let rows = expected.get(&(map, partition)).map_or(0, Vec::len) as u64;
            assert_eq!(statistics.rows[map][partition], rows);
            assert_eq!(statistics.bytes[map][partition] > 0, rows > 0);
        }
    }
    assert_eq!(statistics.total_rows(), metric(&exchange, "shuffle_rows") as u64);
    assert_eq!(statistics.total_rows(), (maps * batches * rows) as u64);
    assert_eq!(statistics.total_bytes(), metric(&exchange, "shuffle_bytes") as u64);
    assert_eq!(statistics.bytes_by_partition().iter().sum::<u64>(), statistics.total_bytes());
    for (partition, rows) in statistics.rows_by_partition().into_iter().enumerate() {
        assert_eq!(keys(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.len() as u64, rows);
    }
    assert_eq!(context.memory_pool().reserved(), 0);
}

#[tokio::test]
async fn single_partition_gathers_every_row_even_without_columns() {
    let empty = Arc::new(Schema::empty());
    let options = RecordBatchOptions::new().with_row_count(Some(7));
    let batch = RecordBatch::try_new_with_options(Arc::clone(&empty), vec![], &options).unwrap();
    let input = TestMemoryExec::try_new_exec(&[vec![batch.clone(); 3], vec![batch; 2]], empty, None).unwrap();
    let exchange = ShuffleExchangeExec::new(input, ExchangePartitioning::Single, None);
    let batches = collect(exchange.execute(0, context(None)).unwrap()).await.unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 35);
}

#[tokio::test]
async fn a_map_task_error_reaches_every_reader() {
    let batch = input(1, 1, 100).execute(0, context(None)).unwrap().next().await.unwrap().unwrap();
    let failing = MockExec::new(vec![Ok(batch), Err(DataFusionError::Execution("input broke".into()))], schema());
    let context = context(Some(1 << 20));
    let exchange = hash(Arc::new(failing), 3);
    for partition in 0..3 {
        let error = collect(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.unwrap_err();
        assert!(error.to_string().contains("input broke"), "{error}");
    }
    assert_eq!(context.memory_pool().reserved(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_streams_and_the_plan_stops_the_map_tasks() {
    let blocking = BlockingExec::new(schema(), 2);
    let refs: Weak<()> = blocking.refs();
    let exchange = hash(Arc::new(blocking), 4);
    let mut stream = exchange.execute(1, context(None)).unwrap();
    assert!(stream.next().now_or_never().is_none(), "the map side never finishes");
    while Weak::strong_count(&refs) < 3 {
        tokio::task::yield_now().await;
    }
    drop((stream, exchange));
    assert_strong_count_converges_to_zero(refs).await;
}

/// `maps` input partitions of keys scrambled over `0..rows` (every `null_every`-th NULL).
fn scrambled(maps: usize, rows: usize, null_every: usize) -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    let partitions: Vec<Vec<RecordBatch>> = (0..maps)
        .map(|map| {
            let keys: Int64Array = (0..rows)
                .filter(|i| i % maps == map)
                .map(|i| (i % null_every != 0).then(|| ((i * 7919) % rows) as i64))
                .collect();
            vec![RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(keys)]).unwrap()]
        })
        .collect();
    TestMemoryExec::try_new_exec(&partitions, schema, None).unwrap()
}

#[tokio::test]
async fn range_partitions_hold_ascending_ranges_of_about_equal_size() {
    use datafusion::arrow::compute::SortOptions;
    use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
    let (rows, partitions) = (40_000, 8);
    for (descending, nulls_first) in [(false, true), (true, false)] {
        let order = PhysicalSortExpr::new(Arc::new(Column::new("k", 0)), SortOptions::new(descending, nulls_first));
        let ordering = LexOrdering::new([order]).unwrap();
        // A tight limit: the first pass's rows spill and come back for the second.
        let context = context(Some(256 * 1024));
        let exchange =
            ShuffleExchangeExec::new(scrambled(3, rows, 50), ExchangePartitioning::Range(ordering, partitions), None);
        let mut previous_last: Option<Option<i64>> = None;
        let mut sizes = Vec::new();
        for partition in 0..partitions {
            let mut keys: Vec<Option<i64>> = Vec::new();
            for batch in collect(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.unwrap() {
                keys.extend(batch.column(0).as_primitive::<Int64Type>().iter());
            }
            // Spark's order: NULL first ascending, last descending.
            let rank = |k: &Option<i64>| match k {
                None => (i8::from(!nulls_first), 0),
                Some(v) => (i8::from(nulls_first), if descending { -v } else { *v }),
            };
            keys.sort_by_key(rank);
            if let (Some(last), Some(first)) = (previous_last, keys.first()) {
                assert!(rank(&last) <= rank(first), "partition {partition} starts before the previous one ends");
            }
            if !keys.is_empty() {
                previous_last = keys.last().copied();
            }
            sizes.push(keys.len());
        }
        assert_eq!(sizes.iter().sum::<usize>(), rows, "every row once");
        let mean = rows / partitions;
        assert!(sizes.iter().all(|s| *s < 2 * mean && *s > mean / 2), "balanced ranges: {sizes:?}");
        assert_eq!(metric(&exchange, "shuffle_rows"), rows, "rows counted once, not per pass");
        assert!(spills(&exchange) > 0, "the tight limit spills");
        assert_eq!(context.memory_pool().reserved(), 0);
    }
}

#[tokio::test]
async fn a_reused_exchange_hands_every_part_to_each_reader_then_lets_go() {
    for limit in [None, Some(32 * 1024)] {
        let context = context(limit);
        let exchange = hash(input(3, 8, 700), 5);
        exchange.add_reader().unwrap();
        let parts = expected(3, 8, 700, 5);
        for partition in 0..5 {
            let first = keys(exchange.execute(partition, Arc::clone(&context)).unwrap()).await;
            let whole = expected_keys(&parts, (0..3).map(|map| (map, partition)));
            assert_eq!(first, whole, "first reader, partition {partition}");
            let second = keys(exchange.execute(partition, Arc::clone(&context)).unwrap()).await;
            assert_eq!(second, first, "second reader, partition {partition}");
            assert!(exchange.execute(partition, Arc::clone(&context)).is_err(), "two readers only");
        }
        assert_eq!(limit.is_some(), spills(&exchange) > 0, "spilled only under the limit");
        assert_eq!(context.memory_pool().reserved(), 0, "memory released after the last reader");
        assert_eq!(context.runtime_env().disk_manager.spilling_progress().active_files_count, 0, "spill files gone");
        assert!(exchange.add_reader().is_err(), "an exchange that ran takes no new reader");
    }
}

/// Which columns [`mixed_batch`] has beside its fixed-width ones.
#[derive(Debug, Clone, Copy)]
enum Beside {
    Nothing,
    /// Strings and binaries in each layout, and booleans: still plain types.
    StringsAndBooleans,
    /// A dictionary-encoded column too, which only the gather routes.
    Dictionary,
}

/// Rows `start..start + rows`, with a column of every fixed width, most with NULLs, and the
/// columns `beside` asks for; sliced out of a larger batch, as its arrays start at an offset.
fn mixed_batch(start: i64, rows: usize, beside: Beside) -> RecordBatch {
    let skipped = 7;
    let keys: Vec<i64> = (start - skipped..start + rows as i64).collect();
    let null_every = |n: i64| move |k: &i64| (k % n != 0).then_some(*k);
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("k", Arc::new(Int64Array::from(keys.clone()))),
        ("i8", Arc::new(keys.iter().map(|k| (k % 5 != 0).then_some(*k as i8)).collect::<Int8Array>())),
        ("i16", Arc::new(keys.iter().map(|k| *k as i16).collect::<Int16Array>())),
        ("f32", Arc::new(keys.iter().map(null_every(7)).map(|k| k.map(|k| k as f32 / 4.0)).collect::<Float32Array>())),
        ("date", Arc::new(Date32Array::from_iter_values(keys.iter().map(|k| *k as i32)))),
        ("ts", Arc::new(keys.iter().map(null_every(3)).collect::<TimestampMicrosecondArray>().with_timezone("UTC"))),
        (
            "dec",
            Arc::new(
                keys.iter()
                    .map(null_every(4))
                    .map(|k| k.map(|k| k as i128 * 1_000_000_007))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(30, 2)
                    .unwrap(),
            ),
        ),
        (
            "dec256",
            Arc::new(
                keys.iter()
                    .map(|k| i256::from_i128(*k as i128) * i256::from_i128(i128::MAX))
                    .collect::<Decimal256Array>()
                    .with_precision_and_scale(76, 0)
                    .unwrap(),
            ),
        ),
        (
            "interval",
            Arc::new(
                keys.iter()
                    .map(null_every(6))
                    .map(|k| k.map(|k| IntervalMonthDayNano::new(k as i32, -(k as i32), k * 1000)))
                    .collect::<IntervalMonthDayNanoArray>(),
            ),
        ),
    ];
    if matches!(beside, Beside::StringsAndBooleans | Beside::Dictionary) {
        // Short values live in their views, long ones in the data buffers.
        let text = |k: i64| if k % 2 == 0 { format!("s{k}") } else { format!("a longer string for key {k}") };
        let texts = || keys.iter().map(null_every(9)).map(|k| k.map(text));
        columns.push(("utf8", Arc::new(texts().collect::<StringArray>())));
        columns.push(("view", Arc::new(texts().collect::<StringViewArray>())));
        columns.push(("large", Arc::new(texts().map(|t| t.map(String::into_bytes)).collect::<LargeBinaryArray>())));
        columns.push((
            "bool",
            Arc::new(keys.iter().map(null_every(5)).map(|k| k.map(|k| k % 3 == 0)).collect::<BooleanArray>()),
        ));
    }
    if matches!(beside, Beside::Dictionary) {
        let names: DictionaryArray<Int32Type> = keys.iter().map(|k| ["a", "b", "c"][(k % 3) as usize]).collect();
        columns.push(("dict", Arc::new(names)));
    }
    RecordBatch::try_from_iter(columns).unwrap().slice(skipped as usize, rows)
}

/// `batch`'s rows in the order of its first column.
fn by_key(batch: &RecordBatch) -> RecordBatch {
    take_record_batch(batch, &sort_to_indices(batch.column(0), None, None).unwrap()).unwrap()
}

#[tokio::test]
async fn every_type_reaches_its_partition_whole_in_batches_of_at_most_batch_size() {
    for beside in [Beside::Nothing, Beside::StringsAndBooleans, Beside::Dictionary] {
        let (maps, batches, rows, partitions, batch_size) = (2, 3, 1000, 7, 256);
        let input: Vec<Vec<RecordBatch>> = (0..maps)
            .map(|map| {
                let first = first_key(map, batches, rows) + 7;
                (0..batches).map(|b| mixed_batch(first + (b * rows) as i64, rows, beside)).collect()
            })
            .collect();
        let schema = input[0][0].schema();
        let all = concat_batches(&schema, input.iter().flatten()).unwrap();
        let exchange = hash(TestMemoryExec::try_new_exec(&input, Arc::clone(&schema), None).unwrap(), partitions);
        let config = SessionConfig::new().with_batch_size(batch_size);
        let context = Arc::new(TaskContext::default().with_session_config(config));
        let ids = partition_of(all.column(0).as_primitive::<Int64Type>().values(), partitions);
        for partition in 0..partitions {
            let batches = collect(exchange.execute(partition, Arc::clone(&context)).unwrap()).await.unwrap();
            assert!(batches.iter().all(|batch| batch.num_rows() <= batch_size));
            let mine: BooleanArray = ids.iter().map(|id| Some(*id == partition)).collect();
            let expected = filter_record_batch(&all, &mine).unwrap();
            let got = concat_batches(&schema, &batches).unwrap();
            assert_eq!(by_key(&got), by_key(&expected), "partition {partition}, {beside:?}");
        }
        assert_eq!(metric(&exchange, "shuffle_rows"), maps * batches * rows);
    }
}
