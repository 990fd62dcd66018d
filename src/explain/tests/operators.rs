//! DataFusion's own operators as Spark's: a root limit as `CollectLimit`, and the union,
//! projection, filter, `range()` and `VALUES` of a query DataFusion plans.

use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::prelude::{SessionConfig, SessionContext};

use super::*;
use crate::exec::range::RangeTable;

#[test]
fn a_root_limit_is_collect_limit() {
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
    let context = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    // The relation `range(0, 10)` reads, registered as a table: the function is SQL's.
    context.register_table("ids", Arc::new(RangeTable::new(0, 10, 1, None))).unwrap();
    let query = "SELECT id * 2 AS twice FROM ids WHERE id > 5 UNION ALL SELECT * FROM (VALUES (1), (2))";
    let plan = context.sql(query).await.unwrap().create_physical_plan().await.unwrap();
    let text = explain(&plan, ExplainMode::Simple, false);
    // Spark 4.3 fuses a union of row-based children into one codegen stage.
    let expected = "== Physical Plan ==\n*(1) Union\n\
        :- *(1) Project [(id#1L * 2) AS twice#2L]\n\
        :  +- *(1) Filter (id#1L > 5)\n\
        :     +- *(1) Range (0, 10, step=1, splits=2)\n\
        +- *(1) LocalTableScan [column1#3L]\n\n";
    assert_eq!(text, expected);
}
