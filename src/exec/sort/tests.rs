//! The sort run for real over generated batches, its rows checked against Arrow's comparison
//! sort of the same rows, for every way a partition can take: already in order, radix-sorted
//! in 64 or 128 bits, or handed to the external sort (other key types, or too little memory).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow::compute::{SortColumn, SortOptions, concat_batches, lexsort_to_indices, take};
use arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef, UInt64Type};
use datafusion::execution::TaskContext;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::common::collect;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::test::TestMemoryExec;

use super::SortExec;

/// A xorshift generator: the same rows on every run.
struct Rows(u64);

impl Rows {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("small", DataType::Int32, true),
        Field::new("wide", DataType::Int64, true),
        Field::new("real", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("id", DataType::UInt64, false),
    ]))
}

/// `batches` batches of `rows` rows: a small-range integer, a full-range one, doubles (with
/// NaN and both zeros) and strings, each with some nulls, and a unique id.
fn batches(batches: usize, rows: usize, seed: u64) -> Vec<RecordBatch> {
    let mut random = Rows(seed);
    (0..batches)
        .map(|b| {
            let mut draw = |nulls: u64| {
                (0..rows).map(|_| random.next()).map(|r| (r % nulls != 0).then_some(r)).collect::<Vec<_>>()
            };
            let small: Int32Array = draw(9).iter().map(|r| r.map(|r| (r % 50) as i32 - 25)).collect();
            let wide: Int64Array = draw(11).iter().map(|r| r.map(|r| r as i64)).collect();
            let specials = [f64::NAN, 0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY];
            let real: Float64Array = draw(13)
                .iter()
                .map(|r| {
                    r.map(|r| if r % 7 == 0 { specials[(r % 5) as usize] } else { (r % 1000) as f64 / 8.0 - 60.0 })
                })
                .collect();
            let text: StringArray = draw(5).iter().map(|r| r.map(|r| format!("k{}", r % 300))).collect();
            let id: UInt64Array = (0..rows as u64).map(|r| (b * rows) as u64 + r).collect();
            let columns: Vec<ArrayRef> =
                vec![Arc::new(small), Arc::new(wide), Arc::new(real), Arc::new(text), Arc::new(id)];
            RecordBatch::try_new(schema(), columns).unwrap()
        })
        .collect()
}

fn ordering(keys: &[(&str, SortOptions)]) -> LexOrdering {
    let schema = schema();
    LexOrdering::new(keys.iter().map(|(name, options)| {
        PhysicalSortExpr::new(Arc::new(Column::new(name, schema.index_of(name).unwrap())), *options)
    }))
    .unwrap()
}

fn context(memory_limit: Option<usize>) -> Arc<TaskContext> {
    let runtime = match memory_limit {
        Some(limit) => RuntimeEnvBuilder::new().with_memory_limit(limit, 1.0),
        None => RuntimeEnvBuilder::new(),
    };
    let config = datafusion::prelude::SessionConfig::new()
        .with_sort_spill_reservation_bytes(64 << 10)
        .with_extension(Arc::new(crate::config::SparkConf::default()));
    Arc::new(TaskContext::default().with_session_config(config).with_runtime(runtime.build_arc().unwrap()))
}

/// Sorts `input` with this sort, checks the rows against Arrow's comparison sort and returns
/// the sort's partition counters by name.
async fn sort_and_check(
    input: Vec<RecordBatch>,
    keys: &[(&str, SortOptions)],
    memory_limit: Option<usize>,
) -> Vec<(String, usize)> {
    let exec = TestMemoryExec::try_new_exec(std::slice::from_ref(&input), schema(), None).unwrap();
    let sort = Arc::new(SortExec::new(ordering(keys), exec).with_preserve_partitioning(true));
    let output = collect(sort.execute(0, context(memory_limit)).unwrap()).await.unwrap();
    let output = concat_batches(&schema(), &output).unwrap();

    let all = concat_batches(&schema(), &input).unwrap();
    let columns: Vec<SortColumn> = keys
        .iter()
        .map(|(name, options)| SortColumn {
            values: all.column_by_name(name).unwrap().clone(),
            options: Some(*options),
        })
        .collect();
    let indices = lexsort_to_indices(&columns, None).unwrap();
    for (name, _) in keys {
        let expected = take(all.column_by_name(name).unwrap(), &indices, None).unwrap();
        let actual = output.column_by_name(name).unwrap();
        assert!(same_values(&expected, actual), "key {name} out of order for {keys:?}");
    }
    // Every row arrives once, whole.
    assert_eq!(by_id(&output), by_id(&all), "rows changed for {keys:?}");

    let metrics = sort.metrics().unwrap().aggregate_by_name();
    metrics
        .iter()
        .filter_map(|m| match m.value() {
            MetricValue::Count { name, count } => Some((name.to_string(), count.value())),
            MetricValue::SpillCount(count) => Some(("spills".to_string(), count.value())),
            _ => None,
        })
        .collect()
}

/// `batch`'s rows in the order of their ids.
fn by_id(batch: &RecordBatch) -> RecordBatch {
    let ids = batch.column_by_name("id").unwrap().as_primitive::<UInt64Type>();
    let mut rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
    rows.sort_by_key(|row| ids.value(*row as usize));
    arrow::compute::take_record_batch(batch, &UInt32Array::from(rows)).unwrap()
}

/// Equal values, NaN equal to NaN and -0.0 told from 0.0 by their bits.
fn same_values(a: &ArrayRef, b: &ArrayRef) -> bool {
    if a.len() != b.len() || a.logical_nulls() != b.logical_nulls() {
        return false;
    }
    match a.data_type() {
        DataType::Float64 => {
            let (a, b) = (a.as_primitive::<Float64Type>(), b.as_primitive::<Float64Type>());
            (0..a.len()).all(|i| a.is_null(i) || a.value(i).to_bits() == b.value(i).to_bits())
        }
        _ => a == b,
    }
}

fn count(counters: &[(String, usize)], name: &str) -> usize {
    counters.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c)
}

const ASC: SortOptions = SortOptions { descending: false, nulls_first: true };
const DESC_NULLS_LAST: SortOptions = SortOptions { descending: true, nulls_first: false };
const ASC_NULLS_LAST: SortOptions = SortOptions { descending: false, nulls_first: false };
const DESC: SortOptions = SortOptions { descending: true, nulls_first: true };

#[tokio::test]
async fn fixed_width_keys_are_radix_sorted_as_a_comparison_sort_orders_them() {
    let cases: Vec<Vec<(&str, SortOptions)>> = vec![
        vec![("small", ASC)],
        vec![("small", DESC_NULLS_LAST)],
        vec![("wide", ASC_NULLS_LAST)],
        vec![("real", ASC)],
        vec![("real", DESC)],
        vec![("small", ASC), ("real", DESC_NULLS_LAST)],
        vec![("real", ASC_NULLS_LAST), ("small", DESC)],
        // Wider than 64 bits together: packed with positions into 128 bits, or handed over.
        vec![("small", DESC), ("wide", ASC)],
        vec![("id", DESC)],
    ];
    for (seed, keys) in cases.iter().enumerate() {
        let counters = sort_and_check(batches(7, 1000, seed as u64 + 1), keys, None).await;
        let radix = count(&counters, "partitions_radix_sorted");
        let external = count(&counters, "partitions_sorted_externally");
        assert_eq!(radix + external, 1, "{keys:?}: {counters:?}");
        if keys.len() == 1 {
            assert_eq!(radix, 1, "one fixed-width key is radix-sorted: {keys:?}");
        }
    }
}

#[tokio::test]
async fn rows_already_in_order_pass_through_unsorted() {
    for keys in [vec![("small", ASC)], vec![("small", DESC_NULLS_LAST), ("text", ASC)], vec![("text", DESC)]] {
        // Sorted by Arrow first, then cut into batches again.
        let all = concat_batches(&schema(), &batches(5, 800, 3)).unwrap();
        let columns: Vec<SortColumn> = keys
            .iter()
            .map(|(name, o)| SortColumn { values: all.column_by_name(name).unwrap().clone(), options: Some(*o) })
            .collect();
        let sorted = arrow::compute::take_record_batch(&all, &lexsort_to_indices(&columns, None).unwrap()).unwrap();
        let input: Vec<RecordBatch> = (0..8).map(|i| sorted.slice(i * 500, 500)).collect();
        let counters = sort_and_check(input, &keys, None).await;
        assert_eq!(count(&counters, "partitions_in_order"), 1, "{keys:?}: {counters:?}");
    }
}

/// `batches(…)` sorted by `keys` with Arrow's sort, cut into `pieces` batches again.
fn sorted_input(keys: &[(&str, SortOptions)], pieces: usize) -> Vec<RecordBatch> {
    let all = concat_batches(&schema(), &batches(40, 1000, 3)).unwrap();
    let columns: Vec<SortColumn> = keys
        .iter()
        .map(|(name, o)| SortColumn { values: all.column_by_name(name).unwrap().clone(), options: Some(*o) })
        .collect();
    let order = lexsort_to_indices(&columns, None).unwrap();
    let size = order.len() / pieces;
    // Each piece its own arrays, so that it accounts for its own memory only.
    (0..pieces).map(|i| arrow::compute::take_record_batch(&all, &order.slice(i * size, size)).unwrap()).collect()
}

#[tokio::test]
async fn rows_in_order_beyond_memory_go_to_disk_in_runs_and_still_pass_through() {
    for keys in [vec![("wide", ASC)], vec![("text", DESC)]] {
        let counters = sort_and_check(sorted_input(&keys, 80), &keys, Some(512 << 10)).await;
        assert_eq!(count(&counters, "partitions_in_order"), 1, "{keys:?}: {counters:?}");
        assert!(count(&counters, "spills") > 1, "{keys:?}: {counters:?}");
    }
    // Out of order after some runs were written: everything goes to the external sort.
    let mut input = sorted_input(&[("wide", ASC)], 80);
    input.swap(10, 70);
    let counters = sort_and_check(input, &[("wide", ASC)], Some(512 << 10)).await;
    assert_eq!(count(&counters, "partitions_sorted_externally"), 1, "{counters:?}");
}

#[tokio::test]
async fn one_row_out_of_order_is_sorted() {
    let all = concat_batches(&schema(), &batches(4, 500, 9)).unwrap();
    let column = SortColumn { values: all.column_by_name("wide").unwrap().clone(), options: Some(ASC) };
    let sorted = arrow::compute::take_record_batch(&all, &lexsort_to_indices(&[column], None).unwrap()).unwrap();
    // The last row moved to the front of the third batch.
    let mut input: Vec<RecordBatch> = (0..4).map(|i| sorted.slice(i * 500, 500)).collect();
    let last = sorted.slice(1999, 1);
    input[3] = input[3].slice(0, 499);
    input[2] = concat_batches(&schema(), &[last, input[2].clone()]).unwrap();
    let counters = sort_and_check(input, &[("wide", ASC)], None).await;
    assert_eq!(count(&counters, "partitions_in_order"), 0);
    assert_eq!(count(&counters, "partitions_radix_sorted"), 1);
}

/// Batches in order each, the last out of order after the second, with an empty batch between
/// them: an aggregate that groups shuffle partitions one by one gives such batches, and one of
/// them may have no groups.
#[tokio::test]
async fn rows_out_of_order_after_an_empty_batch_are_sorted() {
    let all = concat_batches(&schema(), &batches(3, 500, 11)).unwrap();
    let column = SortColumn { values: all.column_by_name("wide").unwrap().clone(), options: Some(ASC) };
    let sorted = arrow::compute::take_record_batch(&all, &lexsort_to_indices(&[column], None).unwrap()).unwrap();
    let (low, middle, high) = (sorted.slice(0, 500), sorted.slice(500, 500), sorted.slice(1000, 500));
    let input = vec![low, high, sorted.slice(0, 0), middle];
    let counters = sort_and_check(input, &[("wide", ASC)], None).await;
    assert_eq!(count(&counters, "partitions_in_order"), 0, "{counters:?}");
}

#[tokio::test]
async fn string_keys_and_a_small_memory_limit_go_to_the_external_sort() {
    let counters = sort_and_check(batches(6, 1000, 5), &[("text", ASC), ("small", DESC)], None).await;
    assert_eq!(count(&counters, "partitions_sorted_externally"), 1, "{counters:?}");

    let counters = sort_and_check(batches(40, 1000, 6), &[("small", ASC)], Some(512 << 10)).await;
    assert_eq!(count(&counters, "partitions_sorted_externally"), 1, "{counters:?}");
}

#[tokio::test]
async fn empty_input_yields_nothing() {
    let counters = sort_and_check(vec![], &[("small", ASC)], None).await;
    assert_eq!(count(&counters, "partitions_in_order"), 1);
}
