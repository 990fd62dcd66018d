//! Aggregates: two phases around an exchange when grouping on another column than the bucket
//! column, one phase on the bucket column, results named after the projection above.

use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::lit;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use super::*;

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
