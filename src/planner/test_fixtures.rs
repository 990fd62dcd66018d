//! Tables, scans, operators and finished stages that tests build physical plans from by hand,
//! shared by the planner's rule tests and EXPLAIN's tests; and a short description of the
//! exchanges and reads a rule left in a plan, for tests to compare.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::common::{JoinType, NullEquality};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::{Column, col, is_not_null, lit};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use object_store::local::LocalFileSystem;

use crate::catalog::location::Location;
use crate::catalog::table::{BucketSpec, ColumnMeta, DataFile, STATISTICS_SIZE, TableMeta};
use crate::catalog::types::SparkType;
use crate::config::SparkConf;
use crate::exec::aqe_shuffle_read::{AqeShuffleReadExec, ShufflePartitionSpec};
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::downcast_plan::downcast_plan;
use crate::exec::file_partition::FileSplitting;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec, ScanFilters, ScanRequest};
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinSpec, JoinStrategy};
use crate::exec::parquet_reads::CountedReads;
use crate::exec::query_stage::ShuffleQueryStageExec;
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
use crate::exec::sort::SortExec;
use crate::planner::table_provider::table_schema;

pub(crate) type Plan = Arc<dyn ExecutionPlan>;

pub(crate) const TX: &[(&str, &str)] = &[("account_id", "bigint"), ("amount", "double"), ("event_date", "date")];
pub(crate) const ACC: &[(&str, &str)] = &[("account_id", "bigint"), ("name", "string")];
/// Three bigint columns, for tables bucketed by one or several of them.
pub(crate) const ABC: &[(&str, &str)] = &[("a", "bigint"), ("b", "bigint"), ("c", "bigint")];

/// A table of `columns`, bucketed (and sorted) by `account_id` into `buckets` if given, one file
/// per bucket (one file without buckets) in each partition directory `event_date=<p>`.
pub(crate) fn table(name: &str, columns: &[(&str, &str)], buckets: Option<u32>, partitions: &[&str]) -> Arc<TableMeta> {
    table_of(name, columns, buckets.map(|n| (n, &["account_id"][..])), 1, partitions)
}

/// A table of `columns`, bucketed (and sorted) by `bucketing`'s columns into its count of
/// buckets, one file per bucket; without buckets its rows lie in `files` files. Partitioned by
/// `event_date` into the directories `event_date=<p>` of `partitions`, if any. Each file holds
/// 1000 rows in 4096 bytes.
pub(crate) fn table_of(
    name: &str,
    columns: &[(&str, &str)],
    bucketing: Option<(u32, &[&str])>,
    files: u32,
    partitions: &[&str],
) -> Arc<TableMeta> {
    let partition_columns: Vec<String> = if partitions.is_empty() { vec![] } else { vec!["event_date".into()] };
    let directories: Vec<String> = partitions.iter().map(|p| format!("event_date={p}")).collect();
    let mut data_files = Vec::new();
    for directory in directories.iter().map(String::as_str).chain(partitions.is_empty().then_some("")) {
        for index in 0..bucketing.map_or(files, |(n, _)| n) {
            let file = format!("part-00000-0000_{index:05}.c000.snappy.parquet");
            data_files.push(DataFile {
                path: if directory.is_empty() { file } else { format!("{directory}/{file}") },
                partition: directory.to_string(),
                bucket: bucketing.map(|_| index),
                row_count: 1000,
                byte_size: 4096,
            });
        }
    }
    let bucket_columns = |columns: &[&str]| columns.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    Arc::new(TableMeta {
        id: 1,
        schema: "default".into(),
        name: name.into(),
        provider: "parquet".into(),
        location: Location::Local(PathBuf::from(format!("/warehouse/{name}"))),
        external: false,
        comment: None,
        created_at: 0,
        version: 1,
        change_seq: 1,
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
        bucket_spec: bucketing.map(|(n, columns)| BucketSpec {
            num_buckets: n,
            bucket_columns: bucket_columns(columns),
            sort_columns: bucket_columns(columns),
        }),
        properties: BTreeMap::new(),
        files: data_files,
        partitions: directories,
    })
}

/// `table` with catalog statistics declaring it `bytes` large.
pub(crate) fn sized(table: Arc<TableMeta>, bytes: u64) -> Arc<TableMeta> {
    let mut table = (*table).clone();
    table.properties.insert(STATISTICS_SIZE.into(), bytes.to_string());
    Arc::new(table)
}

/// A scan of a table, as the planner's `FileSourceStrategy` would have decided it.
pub(crate) struct Scan {
    pub(crate) table: Arc<TableMeta>,
    pub(crate) projection: Vec<usize>,
    pub(crate) status: BucketedStatus,
    pub(crate) filters: ScanFilters,
    pub(crate) partition: Option<&'static str>,
    pub(crate) selected_buckets: Option<Vec<bool>>,
}

impl Scan {
    pub(crate) fn new(table: Arc<TableMeta>) -> Scan {
        let status =
            if table.bucket_spec.is_some() { BucketedStatus::Bucketed } else { BucketedStatus::NotBucketedTable };
        let projection = (0..table.columns.len()).collect();
        Scan { table, projection, status, filters: ScanFilters::default(), partition: None, selected_buckets: None }
    }

    pub(crate) fn status(mut self, status: BucketedStatus) -> Scan {
        self.status = status;
        self
    }

    pub(crate) fn projection(mut self, projection: Vec<usize>) -> Scan {
        self.projection = projection;
        self
    }

    /// `column IS NOT NULL`, pushed to the reader as Spark does.
    pub(crate) fn not_null(mut self, column: &str) -> Scan {
        let schema = table_schema(&self.table).unwrap();
        self.filters.pushed.push(format!("IsNotNull({column})"));
        self.filters.data.push(is_not_null(col(column, &schema).unwrap()).unwrap());
        self
    }

    pub(crate) fn partition(mut self, partition: &'static str, filters: Vec<Arc<dyn PhysicalExpr>>) -> Scan {
        self.partition = Some(partition);
        self.filters.partition = filters;
        self
    }

    /// Bucket pruning: only `buckets` are read.
    pub(crate) fn buckets(mut self, buckets: &[usize]) -> Scan {
        let count = self.table.bucket_spec.as_ref().map_or(0, |s| s.num_buckets as usize);
        self.selected_buckets = Some((0..count).map(|b| buckets.contains(&b)).collect());
        self
    }

    pub(crate) fn build(self) -> Plan {
        let files =
            self.table.files.iter().filter(|f| self.partition.is_none_or(|p| f.partition == p)).cloned().collect();
        Arc::new(
            // No file here is large enough to be split, so no footer is read.
            futures::executor::block_on(FileSourceScanExec::try_new(ScanRequest {
                table_schema: table_schema(&self.table).unwrap(),
                table: self.table,
                projection: self.projection,
                files,
                selected_buckets: self.selected_buckets,
                status: self.status,
                sorted_output: false,
                filters: self.filters,
                predicate: None,
                splitting: FileSplitting { max_partition_bytes: 128 << 20, open_cost: 4 << 20, min_partitions: 2 },
                record_level_filter: false,
                prefilter: None,
                reads: Arc::new(CountedReads::new(
                    Arc::new(LocalFileSystem::new()),
                    RuntimeEnv::default().cache_manager.get_file_metadata_cache(),
                )),
            }))
            .unwrap(),
        )
    }
}

/// A scan of every column of `table`.
pub(crate) fn scan(table: Arc<TableMeta>) -> Plan {
    Scan::new(table).build()
}

pub(crate) fn column(plan: &Plan, name: &str) -> Arc<dyn PhysicalExpr> {
    col(name, &plan.schema()).unwrap()
}

pub(crate) fn columns(plan: &Plan, names: &[&str]) -> Vec<Arc<dyn PhysicalExpr>> {
    names.iter().map(|name| column(plan, name)).collect()
}

/// The columns `names` of `input`, in that order.
pub(crate) fn project(input: Plan, names: &[&str]) -> Plan {
    let exprs: Vec<ProjectionExpr> =
        names.iter().map(|name| ProjectionExpr { expr: column(&input, name), alias: name.to_string() }).collect();
    Arc::new(ProjectionExec::try_new(exprs, input).unwrap())
}

pub(crate) fn not_null(input: Plan, name: &str) -> Plan {
    let predicate = is_not_null(column(&input, name)).unwrap();
    Arc::new(FilterExec::try_new(predicate, input).unwrap())
}

pub(crate) fn local_sort(input: Plan, key: Arc<dyn PhysicalExpr>) -> Plan {
    let ordering = LexOrdering::new([PhysicalSortExpr::new(key, SortOptions::new(false, true))]).unwrap();
    Arc::new(SortExec::new(ordering, input).with_preserve_partitioning(true))
}

pub(crate) fn shuffle(input: Plan, key: Arc<dyn PhysicalExpr>, partitions: usize, reason: Option<&str>) -> Plan {
    Arc::new(ShuffleExchangeExec::new(
        input,
        ExchangePartitioning::Hash(vec![key], partitions),
        reason.map(str::to_string),
    ))
}

/// A hash exchange of `input` on the columns `keys` into `partitions`.
pub(crate) fn exchange(input: Plan, keys: &[&str], partitions: usize) -> Arc<ShuffleExchangeExec> {
    let keys = columns(&input, keys);
    Arc::new(ShuffleExchangeExec::new(input, ExchangePartitioning::Hash(keys, partitions), None))
}

pub(crate) fn join(
    strategy: JoinStrategy,
    build_side: Option<BuildSide>,
    left: Plan,
    right: Plan,
    keys: (Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>),
) -> Plan {
    join_on(strategy, build_side, JoinType::Inner, left, right, vec![keys])
}

/// A join of `join_type` on the key pairs `on`.
pub(crate) fn join_on(
    strategy: JoinStrategy,
    build_side: Option<BuildSide>,
    join_type: JoinType,
    left: Plan,
    right: Plan,
    on: Vec<(Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>)>,
) -> Plan {
    let spec = JoinSpec {
        strategy,
        build_side,
        join_type,
        on,
        filter: None,
        null_equality: NullEquality::NullEqualsNothing,
        null_aware: false,
        skew: false,
        cross: false,
    };
    Arc::new(SparkJoinExec::try_new(spec, left, right).unwrap())
}

/// A join of `join_type` on the columns `left_keys` of `left` and `right_keys` of `right`,
/// pairwise.
pub(crate) fn join_by_name(
    strategy: JoinStrategy,
    build_side: Option<BuildSide>,
    join_type: JoinType,
    (left, left_keys): (Plan, &[&str]),
    (right, right_keys): (Plan, &[&str]),
) -> Plan {
    let on = columns(&left, left_keys).into_iter().zip(columns(&right, right_keys)).collect();
    join_on(strategy, build_side, join_type, left, right, on)
}

/// `SortMergeJoin` of `left` and `right` on `account_id`, each side sorted locally.
pub(crate) fn sort_merge(left: Plan, right: Plan) -> Plan {
    let keys = (column(&left, "account_id"), column(&right, "account_id"));
    let left = local_sort(left, Arc::clone(&keys.0));
    let right = local_sort(right, Arc::clone(&keys.1));
    join(JoinStrategy::SortMerge, None, left, right, keys)
}

pub(crate) fn tx() -> Plan {
    not_null(Scan::new(table("tx", TX, Some(8), &[])).not_null("account_id").build(), "account_id")
}

pub(crate) fn acc() -> Plan {
    not_null(Scan::new(table("acc", ACC, Some(8), &[])).not_null("account_id").build(), "account_id")
}

pub(crate) fn acc_plain() -> Plan {
    not_null(Scan::new(table("acc_plain", ACC, None, &[])).not_null("account_id").build(), "account_id")
}

/// An aggregate in `mode` grouping `input` by the columns `keys` and counting its rows.
pub(crate) fn aggregate(mode: AggregateMode, input: Plan, keys: &[&str]) -> Plan {
    let group = PhysicalGroupBy::new_single(keys.iter().map(|k| (column(&input, k), k.to_string())).collect());
    let count = AggregateExprBuilder::new(count_udaf(), vec![lit(1i64)])
        .schema(input.schema())
        .alias("count(1)")
        .build()
        .unwrap();
    let schema = input.schema();
    Arc::new(AggregateExec::try_new(mode, group, vec![Arc::new(count)], vec![None], input, schema).unwrap())
}

/// The settings `settings` over Spark's defaults.
pub(crate) fn conf(settings: &[(&str, &str)]) -> SparkConf {
    SparkConf::from_settings(&settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// Stage `id`: `exchange` as if its map tasks had written `bytes[map][partition]`.
pub(crate) fn stage(id: usize, exchange: Arc<ShuffleExchangeExec>, bytes: Vec<Vec<u64>>) -> Plan {
    Arc::new(ShuffleQueryStageExec::with_statistics(id, exchange, bytes))
}

/// Stage `id` of a hash exchange on `keys` of a scan of `table` (without buckets, in two
/// partitions), as if its map tasks had written `bytes[map][partition]`; it has as many
/// partitions as `bytes[0]` has figures.
pub(crate) fn hash_stage(id: usize, table: &str, keys: &[&str], bytes: Vec<Vec<u64>>) -> Plan {
    let input = scan(table_of(table, ABC, None, 4, &[]));
    stage(id, exchange(input, keys, bytes[0].len()), bytes)
}

/// Each shuffle stage below `plan`, in plan order, with the specs of the adaptive read over it
/// (`None` where it is read as it is).
pub(crate) fn read_specs(plan: &Plan) -> Vec<(usize, Option<Vec<ShufflePartitionSpec>>)> {
    if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
        return vec![(read.stage().id(), Some(read.specs().to_vec()))];
    }
    if let Some(stage) = plan.downcast_ref::<ShuffleQueryStageExec>() {
        return vec![(stage.id(), None)];
    }
    plan.children().into_iter().flat_map(read_specs).collect()
}

/// Where a side of a plan moves rows: each exchange and adaptive read from the top down to the
/// first scan, join or stage, as `hash(a, b) 8`, `single`, `range(a) 200` and `read[<specs>]`,
/// joined by ` / `, with `broadcast` for a broadcast exchange; other operators of one input are
/// passed through. Empty when nothing moves.
pub(crate) fn movement(plan: &Plan) -> String {
    let mut parts = Vec::new();
    let mut node = Arc::clone(plan);
    loop {
        if let Some(exchange) = node.downcast_ref::<ShuffleExchangeExec>() {
            parts.push(describe_partitioning(exchange.partitioning()));
        } else if let Some(read) = node.downcast_ref::<AqeShuffleReadExec>() {
            parts.push(format!("read{:?}", read.specs()));
        } else if node.is::<BroadcastExchangeExec>() {
            parts.push("broadcast".into());
        } else if node.is::<SparkJoinExec>()
            || node.is::<FileSourceScanExec>()
            || node.is::<ShuffleQueryStageExec>()
            || node.children().len() != 1
        {
            break;
        }
        let child = Arc::clone(node.children()[0]);
        node = child;
    }
    parts.join(" / ")
}

fn describe_partitioning(partitioning: &ExchangePartitioning) -> String {
    let names = |exprs: &mut dyn Iterator<Item = &Arc<dyn PhysicalExpr>>| {
        exprs
            .map(|e| e.downcast_ref::<Column>().map_or_else(|| e.to_string(), |c| c.name().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match partitioning {
        ExchangePartitioning::Hash(exprs, n) => format!("hash({}) {n}", names(&mut exprs.iter())),
        ExchangePartitioning::Single => "single".into(),
        ExchangePartitioning::Range(order, n) => format!("range({}) {n}", names(&mut order.iter().map(|e| &e.expr))),
    }
}

/// The scans below `plan`, in plan order.
pub(crate) fn scans(plan: &Plan) -> Vec<Arc<FileSourceScanExec>> {
    let mut found = Vec::new();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if let Some(scan) = downcast_plan::<FileSourceScanExec>(&node) {
            found.push(scan);
        }
        stack.extend(node.children().into_iter().rev().cloned());
    }
    found
}
