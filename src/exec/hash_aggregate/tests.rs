//! The aggregate run for real over generated batches, its groups checked against sums kept in
//! a `BTreeMap` over the same rows, for each way a partition can take: in order to the end, or
//! handed to DataFusion's hash aggregate at a run out of order or when memory runs out, in one
//! stage and as partial and final stages.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use datafusion::execution::TaskContext;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::AggregateUDF;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::aggregate::{AggregateExprBuilder, AggregateFunctionExpr};
use datafusion::physical_expr::expressions::{Column, cast, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::common::collect;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::test::TestMemoryExec;
use datafusion::prelude::SessionConfig;

use super::{
    HashAggregateExec, PARTITIONS_AGGREGATED_IN_FEW_GROUPS, PARTITIONS_AGGREGATED_IN_ORDER, PARTITIONS_HASH_AGGREGATED,
};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ]))
}

/// A group's figures: count(*), sum(v), min(v), max(v), avg(v).
type Figures = (i64, Option<i64>, Option<i64>, Option<i64>, Option<f64>);

/// `(k, s, v)` rows in `batches` batches of `rows` rows, ordered by (k nulls first, s): each
/// key repeats over a few rows, runs cross batch boundaries, and some keys and values are null.
fn sorted_rows(batches: usize, rows: usize) -> Vec<(Option<i64>, String, Option<i64>)> {
    let mut rows: Vec<_> = (0..batches * rows)
        .map(|i| {
            let i = i as i64;
            let k = (i >= 5).then_some(i / 7);
            let s = format!("s{}", (i / 3) % 2 + (i / 7) * 2);
            let v = (i % 5 != 0).then_some(i * 31 % 101 - 50);
            (k, s, v)
        })
        .collect();
    rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    rows
}

fn to_batches(rows: &[(Option<i64>, String, Option<i64>)], batch_rows: usize) -> Vec<RecordBatch> {
    rows.chunks(batch_rows)
        .map(|chunk| {
            let k: Int64Array = chunk.iter().map(|r| r.0).collect();
            let s: StringArray = chunk.iter().map(|r| Some(r.1.as_str())).collect();
            let v: Int64Array = chunk.iter().map(|r| r.2).collect();
            RecordBatch::try_new(schema(), vec![Arc::new(k), Arc::new(s), Arc::new(v)]).unwrap()
        })
        .collect()
}

/// The figures of each (k, s) group, kept apart from any aggregate.
fn expected(rows: &[(Option<i64>, String, Option<i64>)]) -> BTreeMap<(Option<i64>, String), Figures> {
    let mut groups: BTreeMap<(Option<i64>, String), Vec<Option<i64>>> = BTreeMap::new();
    for (k, s, v) in rows {
        groups.entry((*k, s.clone())).or_default().push(*v);
    }
    groups
        .into_iter()
        .map(|(key, values)| {
            let present: Vec<i64> = values.iter().flatten().copied().collect();
            let sum = (!present.is_empty()).then(|| present.iter().sum::<i64>());
            let avg = sum.map(|s| s as f64 / present.len() as f64);
            let figures = (values.len() as i64, sum, present.iter().min().copied(), present.iter().max().copied(), avg);
            (key, figures)
        })
        .collect()
}

fn function(udaf: Arc<AggregateUDF>, arg: Arc<dyn PhysicalExpr>, name: &str) -> Arc<AggregateFunctionExpr> {
    Arc::new(AggregateExprBuilder::new(udaf, vec![arg]).schema(schema()).alias(name).build().unwrap())
}

fn functions() -> Vec<Arc<AggregateFunctionExpr>> {
    let v = || Arc::new(Column::new("v", 2)) as Arc<dyn PhysicalExpr>;
    vec![
        function(count_udaf(), lit(1i64), "n"),
        function(sum_udaf(), v(), "total"),
        function(min_udaf(), v(), "low"),
        function(max_udaf(), v(), "high"),
        // As SQL's type coercion casts it.
        function(avg_udaf(), cast(v(), &schema(), DataType::Float64).unwrap(), "mean"),
    ]
}

fn group_by() -> PhysicalGroupBy {
    PhysicalGroupBy::new_single(vec![
        (Arc::new(Column::new("k", 0)) as Arc<dyn PhysicalExpr>, "k".to_string()),
        (Arc::new(Column::new("s", 1)) as Arc<dyn PhysicalExpr>, "s".to_string()),
    ])
}

/// `input` aggregated in one stage, or as a partial stage then a final one, each wrapped.
fn plan(input: Vec<RecordBatch>, two_stages: bool) -> Arc<dyn ExecutionPlan> {
    let source = TestMemoryExec::try_new_exec(&[input], schema(), None).unwrap();
    let aggregate = |mode, group_by: PhysicalGroupBy, input| -> Arc<dyn ExecutionPlan> {
        let filters = vec![None; functions().len()];
        let exec = AggregateExec::try_new(mode, group_by, functions(), filters, input, schema()).unwrap();
        HashAggregateExec::wrap_aggregates(Arc::new(exec)).unwrap()
    };
    if two_stages {
        let partial = aggregate(AggregateMode::Partial, group_by(), source as Arc<dyn ExecutionPlan>);
        aggregate(AggregateMode::Final, group_by().as_final(), partial)
    } else {
        aggregate(AggregateMode::Single, group_by(), source as Arc<dyn ExecutionPlan>)
    }
}

fn context(memory_limit: Option<usize>) -> Arc<TaskContext> {
    let runtime = match memory_limit {
        Some(limit) => RuntimeEnvBuilder::new().with_memory_limit(limit, 1.0),
        None => RuntimeEnvBuilder::new(),
    };
    // DataFusion's aggregate sets this much aside to merge what it spilled.
    let config = SessionConfig::new().with_sort_spill_reservation_bytes(64 << 10);
    Arc::new(TaskContext::default().with_session_config(config).with_runtime(runtime.build_arc().unwrap()))
}

/// Runs `plan`, checks its groups against `rows` and returns, for the plan's top aggregate and
/// then the one below it (if any), how many partitions went in order, in few groups and hashed.
async fn aggregate_and_check(
    plan: Arc<dyn ExecutionPlan>,
    rows: &[(Option<i64>, String, Option<i64>)],
    memory_limit: Option<usize>,
) -> Vec<(usize, usize, usize)> {
    let output = collect(plan.execute(0, context(memory_limit)).unwrap()).await.unwrap();
    let mut groups = BTreeMap::new();
    for batch in &output {
        let k = batch.column(0).as_primitive::<Int64Type>();
        let s = batch.column(1).as_string::<i32>();
        let figure = |i: usize| {
            let column = batch.column(i).as_primitive::<Int64Type>();
            move |row: usize| column.is_valid(row).then(|| column.value(row))
        };
        let (sum, low, high) = (figure(3), figure(4), figure(5));
        let count = batch.column(2).as_primitive::<Int64Type>();
        let mean = batch.column(6).as_primitive::<Float64Type>();
        for row in 0..batch.num_rows() {
            let key = (k.is_valid(row).then(|| k.value(row)), s.value(row).to_string());
            let figures =
                (count.value(row), sum(row), low(row), high(row), mean.is_valid(row).then(|| mean.value(row)));
            assert!(groups.insert(key.clone(), figures).is_none(), "group {key:?} emitted twice");
        }
    }
    assert_eq!(groups, expected(rows));

    let mut ways = Vec::new();
    let mut node = Some(plan);
    while let Some(current) = node.take() {
        let metrics = current.metrics().unwrap().aggregate_by_name();
        let count = |name: &str| {
            metrics
                .iter()
                .find(|m| matches!(m.value(), MetricValue::Count { name: n, .. } if n == name))
                .map_or(0, |m| m.value().as_usize())
        };
        ways.push((
            count(PARTITIONS_AGGREGATED_IN_ORDER),
            count(PARTITIONS_AGGREGATED_IN_FEW_GROUPS),
            count(PARTITIONS_HASH_AGGREGATED),
        ));
        node =
            current.children().first().filter(|c| c.downcast_ref::<AggregateExec>().is_some()).map(|c| Arc::clone(c));
    }
    ways
}

#[tokio::test]
async fn grouped_rows_are_aggregated_in_order() {
    let (one_stage, two_stages) = ways_in_one_and_two_stages(&sorted_rows(6, 100)).await;
    assert_eq!(one_stage, [(1, 0, 0)]);
    // Partial states come out grouped, so the final stage runs in order too.
    assert_eq!(two_stages, [(1, 0, 0), (1, 0, 0)]);
}

/// The ways of `rows` aggregated in one stage (batches of 100 rows), then in two (of 64).
async fn ways_in_one_and_two_stages(
    rows: &[(Option<i64>, String, Option<i64>)],
) -> (Vec<(usize, usize, usize)>, Vec<(usize, usize, usize)>) {
    let one_stage = aggregate_and_check(plan(to_batches(rows, 100), false), rows, None).await;
    (one_stage, aggregate_and_check(plan(to_batches(rows, 64), true), rows, None).await)
}

#[tokio::test]
async fn a_run_out_of_order_hands_the_groups_so_far_and_the_rest_to_the_hash_aggregate() {
    let mut rows = sorted_rows(6, 100);
    // The fourth batch starts again from keys already aggregated, and within the batch too.
    rows[300..400].reverse();
    for two_stages in [false, true] {
        let ways = aggregate_and_check(plan(to_batches(&rows, 100), two_stages), &rows, None).await;
        let expected: &[(usize, usize, usize)] = if two_stages { &[(0, 0, 1), (0, 0, 1)] } else { &[(0, 0, 1)] };
        assert_eq!(ways, expected, "two stages: {two_stages}");
    }
    // Out of order from the first batch: nothing is held when the partition is handed over.
    let mut rows = sorted_rows(3, 100);
    rows.reverse();
    let ways = aggregate_and_check(plan(to_batches(&rows, 100), false), &rows, None).await;
    assert_eq!(ways, [(0, 0, 1)]);
}

#[tokio::test]
async fn groups_that_outgrow_their_memory_go_to_the_hash_aggregate() {
    let rows = sorted_rows(1000, 1000);
    let ways = aggregate_and_check(plan(to_batches(&rows, 1000), false), &rows, Some(16 << 20)).await;
    assert_eq!(ways, [(0, 0, 1)]);
}

#[tokio::test]
async fn no_rows_make_no_groups() {
    let ways = aggregate_and_check(plan(Vec::new(), false), &[], None).await;
    assert_eq!(ways, [(1, 0, 0)]);
}

#[tokio::test]
async fn a_partial_aggregate_whose_groups_are_single_rows_hands_them_over() {
    let rows: Vec<_> = (0..5000i64).map(|i| (Some(i), format!("s{i}"), Some(i % 7))).collect();
    let ways = aggregate_and_check(plan(to_batches(&rows, 1000), true), &rows, None).await;
    assert_eq!(ways[1], (0, 0, 1), "the partial stage: {ways:?}");
}

/// `count` rows in no order over the keys (k in NULL, 1, 2; s in "A", "N", "R"): nine groups.
fn unordered_rows(count: usize) -> Vec<(Option<i64>, String, Option<i64>)> {
    (0..count as i64)
        .map(|i| {
            let mixed = i * 7919 % 1009;
            let k = (mixed % 3 != 0).then_some(mixed % 3);
            let s = ["A", "N", "R"][(mixed / 3 % 3) as usize].to_string();
            (k, s, (i % 4 != 0).then_some(mixed - 500))
        })
        .collect()
}

#[tokio::test]
async fn few_groups_out_of_order_are_found_by_their_packed_keys() {
    let (one_stage, two_stages) = ways_in_one_and_two_stages(&unordered_rows(600)).await;
    assert_eq!(one_stage, [(0, 1, 0)]);
    // The partial states come out in the order the groups were first seen: few groups again.
    assert_eq!(two_stages, [(0, 1, 0), (0, 1, 0)]);
}

#[tokio::test]
async fn the_groups_found_in_order_carry_on_as_few_groups() {
    let mut rows = unordered_rows(600);
    rows[..300].sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let ways = aggregate_and_check(plan(to_batches(&rows, 100), false), &rows, None).await;
    assert_eq!(ways, [(0, 1, 0)]);
}

#[tokio::test]
async fn groups_past_the_few_go_to_the_hash_aggregate() {
    let mut rows = unordered_rows(600);
    // A tenth to a seventeenth group in the last batch.
    for (i, row) in rows[550..558].iter_mut().enumerate() {
        row.1 = format!("late{i}");
    }
    // A string past its slot: handed over too.
    let mut long = unordered_rows(300);
    long[250].1 = "a string longer than its slot".to_string();
    for (rows, _why) in [(rows, "seventeen groups"), (long, "a long string")] {
        for two_stages in [false, true] {
            let ways = aggregate_and_check(plan(to_batches(&rows, 100), two_stages), &rows, None).await;
            assert_eq!(ways.last(), Some(&(0, 0, 1)), "{_why}, two stages: {two_stages}: {ways:?}");
        }
    }
}
