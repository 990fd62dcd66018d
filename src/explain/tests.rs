//! Plans built by hand in the shapes of Spark 4.3's own EXPLAIN output
//! (/work/shared/spark-plans/examples-spark-4.3.0.txt), compared line for line. The expected
//! texts are Spark's with the expression ids and plan ids renumbered to ours and
//! `{warehouse}` set to `/warehouse`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{JoinType, NullEquality, ScalarValue};
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::{CastExpr, binary, col, is_not_null, lit};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::sorts::sort::SortExec;

use super::*;
use crate::catalog::metastore::{BucketSpec, ColumnMeta, DataFile, TableMeta};
use crate::planner::table_provider::table_schema;
use crate::catalog::types::SparkType;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec, ScanFilters, ScanRequest};
use crate::exec::join::{BuildSide, JoinSpec, JoinStrategy, SparkJoinExec};
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};

type Plan = Arc<dyn ExecutionPlan>;

const TX: &[(&str, &str)] = &[("account_id", "bigint"), ("amount", "double"), ("event_date", "date")];
const ACC: &[(&str, &str)] = &[("account_id", "bigint"), ("name", "string")];

fn table(name: &str, columns: &[(&str, &str)], buckets: Option<u32>, partitions: &[&str]) -> Arc<TableMeta> {
    let partition_columns: Vec<String> = if partitions.is_empty() { vec![] } else { vec!["event_date".into()] };
    let directories: Vec<String> = partitions.iter().map(|p| format!("event_date={p}")).collect();
    let mut files = Vec::new();
    for directory in directories.iter().map(String::as_str).chain(partitions.is_empty().then_some("")) {
        for bucket in 0..buckets.unwrap_or(1) {
            let file = format!("part-00000-0000_{bucket:05}.c000.snappy.parquet");
            files.push(DataFile {
                path: if directory.is_empty() { file } else { format!("{directory}/{file}") },
                partition: directory.to_string(),
                bucket: buckets.map(|_| bucket),
                row_count: 1000,
                byte_size: 4096,
            });
        }
    }
    Arc::new(TableMeta {
        id: 1,
        schema: "default".into(),
        name: name.into(),
        provider: "parquet".into(),
        location: PathBuf::from(format!("/warehouse/{name}")),
        external: false,
        comment: None,
        created_at: 0,
        version: 1,
        columns: columns
            .iter()
            .map(|(name, ty)| ColumnMeta {
                name: name.to_string(),
                ty: SparkType::parse(ty).unwrap(),
                nullable: true,
                comment: None,
            })
            .collect(),
        partition_columns,
        bucket_spec: buckets.map(|n| BucketSpec {
            num_buckets: n,
            bucket_columns: vec!["account_id".into()],
            sort_columns: vec!["account_id".into()],
        }),
        properties: BTreeMap::new(),
        files,
        partitions: directories,
    })
}

struct Scan {
    table: Arc<TableMeta>,
    projection: Vec<usize>,
    status: BucketedStatus,
    filters: ScanFilters,
    partition: Option<&'static str>,
}

impl Scan {
    fn new(table: Arc<TableMeta>) -> Scan {
        let status =
            if table.bucket_spec.is_some() { BucketedStatus::Bucketed } else { BucketedStatus::NotBucketedTable };
        let projection = (0..table.columns.len()).collect();
        Scan { table, projection, status, filters: ScanFilters::default(), partition: None }
    }

    fn status(mut self, status: BucketedStatus) -> Scan {
        self.status = status;
        self
    }

    fn projection(mut self, projection: Vec<usize>) -> Scan {
        self.projection = projection;
        self
    }

    /// `column IS NOT NULL`, pushed to the reader as Spark does.
    fn not_null(mut self, column: &str) -> Scan {
        let schema = table_schema(&self.table).unwrap();
        self.filters.pushed.push(format!("IsNotNull({column})"));
        self.filters.data.push(is_not_null(col(column, &schema).unwrap()).unwrap());
        self
    }

    fn partition(mut self, partition: &'static str, filters: Vec<Arc<dyn PhysicalExpr>>) -> Scan {
        self.partition = Some(partition);
        self.filters.partition = filters;
        self
    }

    fn build(self) -> Plan {
        let files =
            self.table.files.iter().filter(|f| self.partition.is_none_or(|p| f.partition == p)).cloned().collect();
        Arc::new(
            FileSourceScanExec::try_new(ScanRequest {
                table_schema: table_schema(&self.table).unwrap(),
                table: self.table,
                projection: self.projection,
                files,
                selected_buckets: None,
                status: self.status,
                sorted_output: false,
                filters: self.filters,
                predicate: None,
                target_partitions: 2,
            })
            .unwrap(),
        )
    }
}

fn column(plan: &Plan, name: &str) -> Arc<dyn PhysicalExpr> {
    col(name, &plan.schema()).unwrap()
}

fn not_null(input: Plan, name: &str) -> Plan {
    let predicate = is_not_null(column(&input, name)).unwrap();
    Arc::new(FilterExec::try_new(predicate, input).unwrap())
}

fn local_sort(input: Plan, key: Arc<dyn PhysicalExpr>) -> Plan {
    let ordering = LexOrdering::new([PhysicalSortExpr::new(key, SortOptions::new(false, true))]).unwrap();
    Arc::new(SortExec::new(ordering, input).with_preserve_partitioning(true))
}

fn shuffle(input: Plan, key: Arc<dyn PhysicalExpr>, partitions: usize, reason: Option<&str>) -> Plan {
    Arc::new(ShuffleExchangeExec::new(
        input,
        ExchangePartitioning::Hash(vec![key], partitions),
        reason.map(str::to_string),
    ))
}

fn join(
    strategy: JoinStrategy,
    build_side: Option<BuildSide>,
    left: Plan,
    right: Plan,
    keys: (Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>),
) -> Plan {
    let spec = JoinSpec {
        strategy,
        build_side,
        join_type: JoinType::Inner,
        on: vec![keys],
        filter: None,
        null_equality: NullEquality::NullEqualsNothing,
    };
    Arc::new(SparkJoinExec::try_new(spec, left, right).unwrap())
}

/// `SortMergeJoin` of `left` and `right` on `account_id`, each side sorted locally.
fn sort_merge(left: Plan, right: Plan) -> Plan {
    let keys = (column(&left, "account_id"), column(&right, "account_id"));
    let left = local_sort(left, Arc::clone(&keys.0));
    let right = local_sort(right, Arc::clone(&keys.1));
    join(JoinStrategy::SortMerge, None, left, right, keys)
}

fn tx() -> Plan {
    not_null(Scan::new(table("tx", TX, Some(8), &[])).not_null("account_id").build(), "account_id")
}

fn acc() -> Plan {
    not_null(Scan::new(table("acc", ACC, Some(8), &[])).not_null("account_id").build(), "account_id")
}

fn acc_plain() -> Plan {
    not_null(Scan::new(table("acc_plain", ACC, None, &[])).not_null("account_id").build(), "account_id")
}

fn explain(plan: &Plan, mode: ExplainMode, adaptive: bool) -> String {
    render(plan, mode, &ExplainContext { adaptive, ..Default::default() })
}

#[test]
fn bucketed_sort_merge_join_needs_no_exchange() {
    let plan = sort_merge(tx(), acc());
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), A2);
}

#[test]
fn adaptive_plans_are_wrapped_without_codegen_or_columnar_transitions() {
    let plan = sort_merge(tx(), acc());
    assert_eq!(explain(&plan, ExplainMode::Formatted, true), A1);
}

#[test]
fn simple_mode_prints_one_line_per_operator() {
    let plan = sort_merge(tx(), acc());
    assert_eq!(explain(&plan, ExplainMode::Simple, false), A15);
}

#[test]
fn the_unbucketed_side_is_shuffled_to_the_bucket_count() {
    let right = acc_plain();
    let key = column(&right, "account_id");
    let reason = "acc_plain is not bucketed, so its rows are shuffled into the 8 buckets of tx.";
    let plan = sort_merge(tx(), shuffle(right, key, 8, Some(reason)));
    let section = format!("\n== Extended Information (Bucketing) ==\nExchange (8): {reason}\n");
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), format!("{A4}{section}"));
}

#[test]
fn the_bucketing_section_explains_exchanges_and_unbucketed_scans() {
    let acc6 = Scan::new(table("acc6", ACC, Some(6), &[]))
        .status(BucketedStatus::DisabledByQueryPlanner)
        .not_null("account_id");
    let right = not_null(acc6.build(), "account_id");
    let key = column(&right, "account_id");
    let plan = sort_merge(tx(), shuffle(right, key, 8, None));
    let context = ExplainContext { adaptive: false, v2_bucketing_enabled: true, logical: None };
    let section = "\n== Extended Information (Bucketing) ==\n\
        Scan parquet spark_catalog.default.acc6 (5) is not bucketed: disabled by query planner \
        (Exchange (8) above it redistributes its rows anyway).\n\
        Exchange (8) shuffles its input by hashpartitioning(account_id#4L, 8) for SortMergeJoin Inner (10).\n\
        spark.sql.sources.v2.bucketing.enabled applies to DataSource V2 sources only (storage-partitioned joins); \
        it does not change how CLUSTERED BY tables are read.\n";
    assert_eq!(render(&plan, ExplainMode::Formatted, &context), format!("{A5}{section}"));
}

#[test]
fn floating_point_join_keys_are_normalized() {
    let tx = Scan::new(table("tx", TX, Some(8), &[])).status(BucketedStatus::DisabledByQueryPlanner).not_null("amount");
    let left = not_null(tx.build(), "amount");
    let acc = Scan::new(table("acc", ACC, Some(8), &[]))
        .status(BucketedStatus::DisabledByQueryPlanner)
        .not_null("account_id");
    let right = not_null(acc.build(), "account_id");
    let left_key = column(&left, "amount");
    let right_key: Arc<dyn PhysicalExpr> =
        Arc::new(CastExpr::new(column(&right, "account_id"), DataType::Float64, None));
    let left = local_sort(shuffle(left, Arc::clone(&left_key), 200, None), Arc::clone(&left_key));
    let right = local_sort(shuffle(right, Arc::clone(&right_key), 200, None), Arc::clone(&right_key));
    let plan = join(JoinStrategy::SortMerge, None, left, right, (left_key, right_key));
    let text = explain(&plan, ExplainMode::Formatted, false);
    assert_eq!(text.split("\n== Extended").next().unwrap(), A14);
}

#[test]
fn broadcast_hash_join_builds_the_right_side() {
    let left = not_null(Scan::new(table("tx_plain", TX, None, &[])).not_null("account_id").build(), "account_id");
    let right = acc_plain();
    let keys = (column(&left, "account_id"), column(&right, "account_id"));
    let broadcast: Plan = Arc::new(BroadcastExchangeExec::new(right, vec![Arc::clone(&keys.1)]));
    let plan = join(JoinStrategy::BroadcastHash, Some(BuildSide::Right), left, broadcast, keys);
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), A12);
}

#[test]
fn grouping_on_a_non_bucket_column_aggregates_in_two_phases() {
    let tx = Scan::new(table("tx", TX, Some(8), &[])).projection(vec![1]).status(BucketedStatus::BucketColumnsNotRead);
    let scan = tx.build();
    let group = PhysicalGroupBy::new_single(vec![(column(&scan, "amount"), "amount".into())]);
    let count = Arc::new(
        AggregateExprBuilder::new(count_udaf(), vec![lit(1i64)])
            .schema(scan.schema())
            .alias("count(1)")
            .build()
            .unwrap(),
    );
    let partial: Plan = Arc::new(
        AggregateExec::try_new(
            AggregateMode::Partial,
            group.clone(),
            vec![Arc::clone(&count)],
            vec![None],
            Arc::clone(&scan),
            scan.schema(),
        )
        .unwrap(),
    );
    let exchange = shuffle(Arc::clone(&partial), column(&partial, "amount"), 200, None);
    let plan: Plan = Arc::new(
        AggregateExec::try_new(
            AggregateMode::FinalPartitioned,
            group.as_final(),
            vec![count],
            vec![None],
            exchange,
            scan.schema(),
        )
        .unwrap(),
    );
    let text = explain(&plan, ExplainMode::Formatted, false);
    assert_eq!(text.split("\n== Extended").next().unwrap(), A10);
}

#[test]
fn grouping_on_the_bucket_column_aggregates_once() {
    let scan = Scan::new(table("tx", TX, Some(8), &[])).projection(vec![0, 1]).build();
    let group = PhysicalGroupBy::new_single(vec![(column(&scan, "account_id"), "account_id".into())]);
    let sum = AggregateExprBuilder::new(sum_udaf(), vec![column(&scan, "amount")])
        .schema(scan.schema())
        .alias("sum(tx.amount)")
        .build()
        .unwrap();
    let aggregate: Plan = Arc::new(
        AggregateExec::try_new(
            AggregateMode::SinglePartitioned,
            group,
            vec![Arc::new(sum)],
            vec![None],
            Arc::clone(&scan),
            scan.schema(),
        )
        .unwrap(),
    );
    // DataFusion names the result in a projection above; Spark names the aggregate's result.
    let names = [("account_id", "account_id"), ("sum(tx.amount)", "sum(amount)")];
    let exprs =
        names.map(|(column_name, alias)| ProjectionExpr { expr: column(&aggregate, column_name), alias: alias.into() });
    let plan: Plan = Arc::new(ProjectionExec::try_new(exprs, aggregate).unwrap());
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), A9);
}

#[test]
fn a_scan_with_a_filter_is_not_adaptive() {
    let mut scan =
        Scan::new(table("tx", TX, Some(8), &[])).status(BucketedStatus::DisabledByQueryPlanner).not_null("account_id");
    scan.filters.pushed.push("EqualTo(account_id,42)".into());
    let scan = scan.build();
    let key = column(&scan, "account_id");
    let condition = binary(
        is_not_null(Arc::clone(&key)).unwrap(),
        Operator::And,
        binary(key, Operator::Eq, lit(42i64), &scan.schema()).unwrap(),
        &scan.schema(),
    )
    .unwrap();
    let plan: Plan = Arc::new(FilterExec::try_new(condition, scan).unwrap());
    let text = explain(&plan, ExplainMode::Formatted, true);
    assert_eq!(text.split("\n== Extended").next().unwrap(), A8);
}

#[test]
fn partition_filters_select_partition_directories() {
    let ev = table("ev", TX, Some(8), &["2026-01-01", "2026-01-02", "2026-01-03"]);
    let schema = table_schema(&ev).unwrap();
    let date = col("event_date", &schema).unwrap();
    let day = lit(ScalarValue::Date32(Some(20455)));
    let filters = vec![is_not_null(Arc::clone(&date)).unwrap(), binary(date, Operator::Eq, day, &schema).unwrap()];
    let scan = Scan::new(ev).not_null("account_id").partition("event_date=2026-01-02", filters).build();
    let plan = sort_merge(not_null(scan, "account_id"), acc());
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), A11);
}

#[test]
fn codegen_lists_the_stages() {
    let plan = sort_merge(tx(), acc());
    let text = explain(&plan, ExplainMode::Codegen, false);
    assert!(text.starts_with("Found 3 WholeStageCodegen subtrees.\n== Subtree 1 / 3 ==\n*(1) Sort [account_id#1L ASC NULLS FIRST], false, 0\n"));
    assert!(text.contains("== Subtree 3 / 3 ==\n*(3) SortMergeJoin [account_id#1L], [account_id#4L], Inner\n"));
    assert_eq!(explain(&plan, ExplainMode::Codegen, true), "Found 0 WholeStageCodegen subtrees.\n");
}

#[test]
fn extended_and_cost_print_the_logical_plan() {
    let plan = not_null(
        Scan::new(table("tx", TX, Some(8), &[])).status(BucketedStatus::DisabledByQueryPlanner).build(),
        "account_id",
    );
    let logical = "Filter: tx.account_id IS NOT NULL\n  TableScan: tx projection=[account_id, amount, event_date]";
    let context = ExplainContext { adaptive: true, v2_bucketing_enabled: false, logical: Some(logical.into()) };
    let physical = "*(1) Filter isnotnull(account_id#1L)\n+- *(1) ColumnarToRow\n   +- FileScan parquet";
    let extended = render(&plan, ExplainMode::Extended, &context);
    let expected = format!(
        "== Parsed Logical Plan ==\n{logical}\n\n== Analyzed Logical Plan ==\naccount_id: bigint, amount: double, event_date: date\n\
         {logical}\n\n== Optimized Logical Plan ==\n{logical}\n\n== Physical Plan ==\n{physical}"
    );
    assert!(extended.starts_with(&expected), "{extended}");
    let cost = render(&plan, ExplainMode::Cost, &context);
    let expected = "== Optimized Logical Plan ==\nFilter: tx.account_id IS NOT NULL, Statistics(sizeInBytes=32.0 KiB)\n  \
        TableScan: tx projection=[account_id, amount, event_date], Statistics(sizeInBytes=32.0 KiB)\n\n\
        == Physical Plan ==\n*(1) Filter";
    assert!(cost.starts_with(expected), "{cost}");
}

const A1: &str = r#"== Physical Plan ==
AdaptiveSparkPlan (8)
+- SortMergeJoin Inner (7)
   :- Sort (3)
   :  +- Filter (2)
   :     +- Scan parquet spark_catalog.default.tx (1)
   +- Sort (6)
      +- Filter (5)
         +- Scan parquet spark_catalog.default.acc (4)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>
SelectedBucketsCount: 8 out of 8

(2) Filter
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(3) Sort
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [account_id#1L ASC NULLS FIRST], false, 0

(4) Scan parquet spark_catalog.default.acc
Output [2]: [account_id#4L, name#5]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/acc]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>
SelectedBucketsCount: 8 out of 8

(5) Filter
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(6) Sort
Input [2]: [account_id#4L, name#5]
Arguments: [account_id#4L ASC NULLS FIRST], false, 0

(7) SortMergeJoin
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

(8) AdaptiveSparkPlan
Output [5]: [account_id#1L, amount#2, event_date#3, account_id#4L, name#5]
Arguments: isFinalPlan=false

"#;

const A2: &str = r#"== Physical Plan ==
* SortMergeJoin Inner (9)
:- * Sort (4)
:  +- * Filter (3)
:     +- * ColumnarToRow (2)
:        +- Scan parquet spark_catalog.default.tx (1)
+- * Sort (8)
   +- * Filter (7)
      +- * ColumnarToRow (6)
         +- Scan parquet spark_catalog.default.acc (5)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>
SelectedBucketsCount: 8 out of 8

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(4) Sort [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [account_id#1L ASC NULLS FIRST], false, 0

(5) Scan parquet spark_catalog.default.acc
Output [2]: [account_id#4L, name#5]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/acc]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>
SelectedBucketsCount: 8 out of 8

(6) ColumnarToRow [codegen id : 2]
Input [2]: [account_id#4L, name#5]

(7) Filter [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(8) Sort [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Arguments: [account_id#4L ASC NULLS FIRST], false, 0

(9) SortMergeJoin [codegen id : 3]
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

"#;

const A15: &str = r#"== Physical Plan ==
*(3) SortMergeJoin [account_id#1L], [account_id#4L], Inner
:- *(1) Sort [account_id#1L ASC NULLS FIRST], false, 0
:  +- *(1) Filter isnotnull(account_id#1L)
:     +- *(1) ColumnarToRow
:        +- FileScan parquet spark_catalog.default.tx[account_id#1L,amount#2,event_date#3] Batched: true, Bucketed: true, DataFilters: [isnotnull(account_id#1L)], Format: Parquet, Location: InMemoryFileIndex(1 paths)[file:/warehouse/tx], PartitionFilters: [], PushedFilters: [IsNotNull(account_id)], ReadSchema: struct<account_id:bigint,amount:double,event_date:date>, SelectedBucketsCount: 8 out of 8
+- *(2) Sort [account_id#4L ASC NULLS FIRST], false, 0
   +- *(2) Filter isnotnull(account_id#4L)
      +- *(2) ColumnarToRow
         +- FileScan parquet spark_catalog.default.acc[account_id#4L,name#5] Batched: true, Bucketed: true, DataFilters: [isnotnull(account_id#4L)], Format: Parquet, Location: InMemoryFileIndex(1 paths)[file:/warehouse/acc], PartitionFilters: [], PushedFilters: [IsNotNull(account_id)], ReadSchema: struct<account_id:bigint,name:string>, SelectedBucketsCount: 8 out of 8

"#;

const A4: &str = r#"== Physical Plan ==
* SortMergeJoin Inner (10)
:- * Sort (4)
:  +- * Filter (3)
:     +- * ColumnarToRow (2)
:        +- Scan parquet spark_catalog.default.tx (1)
+- * Sort (9)
   +- Exchange (8)
      +- * Filter (7)
         +- * ColumnarToRow (6)
            +- Scan parquet spark_catalog.default.acc_plain (5)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>
SelectedBucketsCount: 8 out of 8

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(4) Sort [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [account_id#1L ASC NULLS FIRST], false, 0

(5) Scan parquet spark_catalog.default.acc_plain
Output [2]: [account_id#4L, name#5]
Batched: true
Location: InMemoryFileIndex [file:/warehouse/acc_plain]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>

(6) ColumnarToRow [codegen id : 2]
Input [2]: [account_id#4L, name#5]

(7) Filter [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(8) Exchange
Input [2]: [account_id#4L, name#5]
Arguments: hashpartitioning(account_id#4L, 8), ENSURE_REQUIREMENTS, [plan_id=1]

(9) Sort [codegen id : 3]
Input [2]: [account_id#4L, name#5]
Arguments: [account_id#4L ASC NULLS FIRST], false, 0

(10) SortMergeJoin [codegen id : 4]
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

"#;

const A5: &str = r#"== Physical Plan ==
* SortMergeJoin Inner (10)
:- * Sort (4)
:  +- * Filter (3)
:     +- * ColumnarToRow (2)
:        +- Scan parquet spark_catalog.default.tx (1)
+- * Sort (9)
   +- Exchange (8)
      +- * Filter (7)
         +- * ColumnarToRow (6)
            +- Scan parquet spark_catalog.default.acc6 (5)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>
SelectedBucketsCount: 8 out of 8

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(4) Sort [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [account_id#1L ASC NULLS FIRST], false, 0

(5) Scan parquet spark_catalog.default.acc6
Output [2]: [account_id#4L, name#5]
Batched: true
Bucketed: false (disabled by query planner)
Location: InMemoryFileIndex [file:/warehouse/acc6]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>

(6) ColumnarToRow [codegen id : 2]
Input [2]: [account_id#4L, name#5]

(7) Filter [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(8) Exchange
Input [2]: [account_id#4L, name#5]
Arguments: hashpartitioning(account_id#4L, 8), ENSURE_REQUIREMENTS, [plan_id=1]

(9) Sort [codegen id : 3]
Input [2]: [account_id#4L, name#5]
Arguments: [account_id#4L ASC NULLS FIRST], false, 0

(10) SortMergeJoin [codegen id : 4]
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

"#;

const A8: &str = r#"== Physical Plan ==
* Filter (3)
+- * ColumnarToRow (2)
   +- Scan parquet spark_catalog.default.tx (1)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: false (disabled by query planner)
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(account_id), EqualTo(account_id,42)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : (isnotnull(account_id#1L) AND (account_id#1L = 42))

"#;

const A9: &str = r#"== Physical Plan ==
* HashAggregate (3)
+- * ColumnarToRow (2)
   +- Scan parquet spark_catalog.default.tx (1)


(1) Scan parquet spark_catalog.default.tx
Output [2]: [account_id#1L, amount#2]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/tx]
ReadSchema: struct<account_id:bigint,amount:double>
SelectedBucketsCount: 8 out of 8

(2) ColumnarToRow [codegen id : 1]
Input [2]: [account_id#1L, amount#2]

(3) HashAggregate [codegen id : 1]
Input [2]: [account_id#1L, amount#2]
Keys [1]: [account_id#1L]
Functions [1]: [sum(amount#2)]
Aggregate Attributes [1]: [sum(amount#2)#4]
Results [2]: [account_id#1L, sum(amount#2)#4 AS sum(amount)#5]

"#;

const A10: &str = r#"== Physical Plan ==
* HashAggregate (5)
+- Exchange (4)
   +- * HashAggregate (3)
      +- * ColumnarToRow (2)
         +- Scan parquet spark_catalog.default.tx (1)


(1) Scan parquet spark_catalog.default.tx
Output [1]: [amount#2]
Batched: true
Bucketed: false (bucket column(s) not read)
Location: InMemoryFileIndex [file:/warehouse/tx]
ReadSchema: struct<amount:double>

(2) ColumnarToRow [codegen id : 1]
Input [1]: [amount#2]

(3) HashAggregate [codegen id : 1]
Input [1]: [amount#2]
Keys [1]: [knownfloatingpointnormalized(normalizenanandzero(amount#2)) AS amount#2]
Functions [1]: [partial_count(1)]
Aggregate Attributes [1]: [count#4L]
Results [2]: [amount#2, count#5L]

(4) Exchange
Input [2]: [amount#2, count#5L]
Arguments: hashpartitioning(amount#2, 200), ENSURE_REQUIREMENTS, [plan_id=1]

(5) HashAggregate [codegen id : 2]
Input [2]: [amount#2, count#5L]
Keys [1]: [amount#2]
Functions [1]: [count(1)]
Aggregate Attributes [1]: [count(1)#6L]
Results [2]: [amount#2, count(1)#6L AS count(1)#7L]

"#;

const A11: &str = r#"== Physical Plan ==
* SortMergeJoin Inner (9)
:- * Sort (4)
:  +- * Filter (3)
:     +- * ColumnarToRow (2)
:        +- Scan parquet spark_catalog.default.ev (1)
+- * Sort (8)
   +- * Filter (7)
      +- * ColumnarToRow (6)
         +- Scan parquet spark_catalog.default.acc (5)


(1) Scan parquet spark_catalog.default.ev
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/ev/event_date=2026-01-02]
PartitionFilters: [isnotnull(event_date#3), (event_date#3 = 2026-01-02)]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double>
SelectedBucketsCount: 8 out of 8

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(4) Sort [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [account_id#1L ASC NULLS FIRST], false, 0

(5) Scan parquet spark_catalog.default.acc
Output [2]: [account_id#4L, name#5]
Batched: true
Bucketed: true
Location: InMemoryFileIndex [file:/warehouse/acc]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>
SelectedBucketsCount: 8 out of 8

(6) ColumnarToRow [codegen id : 2]
Input [2]: [account_id#4L, name#5]

(7) Filter [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(8) Sort [codegen id : 2]
Input [2]: [account_id#4L, name#5]
Arguments: [account_id#4L ASC NULLS FIRST], false, 0

(9) SortMergeJoin [codegen id : 3]
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

"#;

const A12: &str = r#"== Physical Plan ==
* BroadcastHashJoin Inner BuildRight (8)
:- * Filter (3)
:  +- * ColumnarToRow (2)
:     +- Scan parquet spark_catalog.default.tx_plain (1)
+- BroadcastExchange (7)
   +- * Filter (6)
      +- * ColumnarToRow (5)
         +- Scan parquet spark_catalog.default.acc_plain (4)


(1) Scan parquet spark_catalog.default.tx_plain
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Location: InMemoryFileIndex [file:/warehouse/tx_plain]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>

(2) ColumnarToRow [codegen id : 2]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 2]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(account_id#1L)

(4) Scan parquet spark_catalog.default.acc_plain
Output [2]: [account_id#4L, name#5]
Batched: true
Location: InMemoryFileIndex [file:/warehouse/acc_plain]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>

(5) ColumnarToRow [codegen id : 1]
Input [2]: [account_id#4L, name#5]

(6) Filter [codegen id : 1]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(7) BroadcastExchange
Input [2]: [account_id#4L, name#5]
Arguments: HashedRelationBroadcastMode(List(input[0, bigint, false]),false), [plan_id=1]

(8) BroadcastHashJoin [codegen id : 2]
Left keys [1]: [account_id#1L]
Right keys [1]: [account_id#4L]
Join type: Inner
Join condition: None

"#;

const A14: &str = r#"== Physical Plan ==
* SortMergeJoin Inner (11)
:- * Sort (5)
:  +- Exchange (4)
:     +- * Filter (3)
:        +- * ColumnarToRow (2)
:           +- Scan parquet spark_catalog.default.tx (1)
+- * Sort (10)
   +- Exchange (9)
      +- * Filter (8)
         +- * ColumnarToRow (7)
            +- Scan parquet spark_catalog.default.acc (6)


(1) Scan parquet spark_catalog.default.tx
Output [3]: [account_id#1L, amount#2, event_date#3]
Batched: true
Bucketed: false (disabled by query planner)
Location: InMemoryFileIndex [file:/warehouse/tx]
PushedFilters: [IsNotNull(amount)]
ReadSchema: struct<account_id:bigint,amount:double,event_date:date>

(2) ColumnarToRow [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]

(3) Filter [codegen id : 1]
Input [3]: [account_id#1L, amount#2, event_date#3]
Condition : isnotnull(amount#2)

(4) Exchange
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: hashpartitioning(knownfloatingpointnormalized(normalizenanandzero(amount#2)), 200), ENSURE_REQUIREMENTS, [plan_id=1]

(5) Sort [codegen id : 2]
Input [3]: [account_id#1L, amount#2, event_date#3]
Arguments: [knownfloatingpointnormalized(normalizenanandzero(amount#2)) ASC NULLS FIRST], false, 0

(6) Scan parquet spark_catalog.default.acc
Output [2]: [account_id#4L, name#5]
Batched: true
Bucketed: false (disabled by query planner)
Location: InMemoryFileIndex [file:/warehouse/acc]
PushedFilters: [IsNotNull(account_id)]
ReadSchema: struct<account_id:bigint,name:string>

(7) ColumnarToRow [codegen id : 3]
Input [2]: [account_id#4L, name#5]

(8) Filter [codegen id : 3]
Input [2]: [account_id#4L, name#5]
Condition : isnotnull(account_id#4L)

(9) Exchange
Input [2]: [account_id#4L, name#5]
Arguments: hashpartitioning(knownfloatingpointnormalized(normalizenanandzero(cast(account_id#4L as double))), 200), ENSURE_REQUIREMENTS, [plan_id=2]

(10) Sort [codegen id : 4]
Input [2]: [account_id#4L, name#5]
Arguments: [knownfloatingpointnormalized(normalizenanandzero(cast(account_id#4L as double))) ASC NULLS FIRST], false, 0

(11) SortMergeJoin [codegen id : 5]
Left keys [1]: [knownfloatingpointnormalized(normalizenanandzero(amount#2))]
Right keys [1]: [knownfloatingpointnormalized(normalizenanandzero(cast(account_id#4L as double)))]
Join type: Inner
Join condition: None

"#;

#[test]
fn a_root_limit_is_collect_limit() {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
    let scan = Scan::new(table("tx_plain", TX, None, &[])).build();
    let local: Plan = Arc::new(LocalLimitExec::new(scan, 10));
    let plan: Plan = Arc::new(GlobalLimitExec::new(Arc::new(CoalescePartitionsExec::new(local)), 0, Some(10)));
    let text = explain(&plan, ExplainMode::Simple, true);
    assert!(
        text.starts_with("== Physical Plan ==\nCollectLimit 10\n+- *(1) ColumnarToRow\n   +- FileScan parquet"),
        "{text}"
    );
}

#[tokio::test]
async fn datafusion_operators_print_as_spark_operators() {
    use datafusion::prelude::{SessionConfig, SessionContext};
    let context = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    context.register_udtf("range", Arc::new(crate::sql::functions::range::SparkRange));
    let query = "SELECT id * 2 AS twice FROM range(0, 10) WHERE id > 5 UNION ALL SELECT * FROM (VALUES (1), (2))";
    let plan = context.sql(query).await.unwrap().create_physical_plan().await.unwrap();
    let text = explain(&plan, ExplainMode::Simple, false);
    let expected = "== Physical Plan ==\nUnion\n\
        :- *(1) Project [(id#1L * 2) AS twice#2L]\n\
        :  +- *(1) Filter (id#1L > 5)\n\
        :     +- *(1) Range (0, 10, step=1, splits=2)\n\
        +- *(2) Project [column1#3L AS twice#4L]\n   \
        +- *(2) LocalTableScan [column1#3L]\n\n";
    assert_eq!(text, expected);
}
