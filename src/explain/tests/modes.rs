//! The modes of EXPLAIN on one sort-merge join: the adaptive wrapper, simple and codegen, and
//! the logical plans EXTENDED and COST print.

use super::*;

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
fn codegen_lists_the_stages() {
    let plan = sort_merge(tx(), acc());
    let text = explain(&plan, ExplainMode::Codegen, false);
    assert!(text.starts_with("Found 3 WholeStageCodegen subtrees.\n== Subtree 1 / 3 ==\n*(1) Sort [account_id#1L ASC NULLS FIRST], false, 0\n"));
    assert!(text.contains("== Subtree 3 / 3 ==\n*(3) SortMergeJoin [account_id#1L], [account_id#4L], Inner\n"));
    assert_eq!(explain(&plan, ExplainMode::Codegen, true), "Found 0 WholeStageCodegen subtrees.\n");
}

#[test]
fn extended_prints_each_logical_stage_and_cost_the_optimized_one() {
    let plan = not_null(
        Scan::new(table("tx", TX, Some(8), &[])).status(BucketedStatus::DisabledByQueryPlanner).build(),
        "account_id",
    );
    let logical = LogicalStages {
        parsed: "Projection: *\n  Filter: tx.account_id IS NOT NULL\n    TableScan: tx\n".into(),
        analyzed: "Projection: tx.account_id, tx.amount, tx.event_date\n  Filter: tx.account_id IS NOT NULL\n    TableScan: tx\n"
            .into(),
        optimized: "Filter: tx.account_id IS NOT NULL\n  TableScan: tx projection=[account_id, amount, event_date]".into(),
    };
    let context = ExplainContext { conf: SparkConf::default(), logical: Some(logical.clone()) };
    let physical = "*(1) Filter isnotnull(account_id#1L)\n+- *(1) ColumnarToRow\n   +- FileScan parquet";
    let extended = render(&plan, ExplainMode::Extended, &context);
    let expected = format!(
        "== Parsed Logical Plan ==\n{}\n\n== Analyzed Logical Plan ==\naccount_id: bigint, amount: double, event_date: date\n\
         {}\n\n== Optimized Logical Plan ==\n{}\n\n== Physical Plan ==\n{physical}",
        logical.parsed.trim_end(),
        logical.analyzed.trim_end(),
        logical.optimized
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
