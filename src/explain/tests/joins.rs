//! Joins: bucketed sort-merge joins without an exchange, the unbucketed side shuffled to the
//! bucket count and the bucketing section explaining it, normalized floating-point keys, and
//! the broadcast hash join.

use datafusion::arrow::datatypes::DataType;
use datafusion::physical_expr::expressions::CastExpr;

use super::*;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;

#[test]
fn bucketed_sort_merge_join_needs_no_exchange() {
    let plan = sort_merge(tx(), acc());
    assert_eq!(explain(&plan, ExplainMode::Formatted, false), A2);
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
    let context =
        ExplainContext { conf: SparkConf { v2_bucketing_enabled: true, ..SparkConf::default() }, logical: None };
    let section = "\n== Extended Information (Bucketing) ==\n\
        Scan parquet spark_catalog.default.acc6 (5) is not bucketed: disabled by query planner \
        (Exchange (8) above it redistributes its rows anyway).\n\
        Exchange (8) shuffles its input by hashpartitioning(account_id#4L, 8) for SortMergeJoin Inner (10).\n\
        spark.sql.sources.v2.bucketing.enabled applies to DataSource V2 sources only (storage-partitioned joins); \
        it does not change how CLUSTERED BY tables are read.\n";
    assert_eq!(spark_text(render(&plan, ExplainMode::Formatted, &context)), format!("{A5}{section}"));
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
