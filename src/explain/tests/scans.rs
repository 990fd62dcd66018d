//! Scans: pushed filters under a filter that needs no exchange, and partition filters
//! selecting partition directories.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{binary, lit};

use super::*;

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
