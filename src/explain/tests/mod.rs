//! Plans built by hand in the shapes of Spark 4.3's own EXPLAIN output
//! (/work/shared/spark-plans/examples-spark-4.3.0.txt), compared line for line. The expected
//! texts are Spark's with the expression ids and plan ids renumbered to ours and
//! `{warehouse}` set to `/warehouse`. This file holds the tables, scans and operators the
//! tests build plans from; the tests are grouped by theme in the files beside it.

mod aggregates;
mod joins;
mod modes;
mod operators;
mod scans;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::arrow::compute::SortOptions;
use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_expr::expressions::{col, is_not_null};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;

use super::*;
use crate::catalog::metastore::{BucketSpec, ColumnMeta, DataFile, TableMeta};
use crate::catalog::types::SparkType;
use crate::config::SparkConf;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec, ScanFilters, ScanRequest};
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinSpec, JoinStrategy};
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
use crate::planner::adaptive::AdaptiveSparkPlanExec;
use crate::planner::adaptive::insert_adaptive_spark_plan::should_apply;
use crate::planner::hints::QueryHints;
use crate::planner::table_provider::table_schema;

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
        null_aware: false,
        skew: false,
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

/// EXPLAIN of `plan`, which runs adaptively if `adaptive` and Spark would (as the session plans it).
fn explain(plan: &Plan, mode: ExplainMode, adaptive: bool) -> String {
    let plan = if adaptive && should_apply(plan) {
        Arc::new(AdaptiveSparkPlanExec::new(Arc::clone(plan), SparkConf::default(), QueryHints::default()))
    } else {
        Arc::clone(plan)
    };
    spark_text(render(&plan, mode, &ExplainContext::default()))
}

/// The text Spark prints: what comes before our advice section, which `tests/table_statistics.rs`
/// checks over the wire.
fn spark_text(mut text: String) -> String {
    if let Some(advice) = text.find("\n== Advice (Bucketing) ==\n") {
        text.truncate(advice);
    }
    text
}
