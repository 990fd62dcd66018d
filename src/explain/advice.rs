//! `== Advice (Bucketing) ==`: after EXPLAIN FORMATTED's text, what a user can change so that
//! an exchange goes away or the buckets serve better, each line naming the rule or guideline
//! it concerns and the fix. Spark applies these rules without saying which one a query broke.
//!
//! Judged from the plan, the session's settings and the metastore (each file's bucket, rows
//! and bytes, and declared statistics), never from the data.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;

use super::cost::bytes_to_string;
use super::plan::{Node, address};
use super::tree::post_order;
use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::catalog::table::TableMeta;
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::BuildSide;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::join_selection::can_broadcast;
use crate::planner::scan_lineage::{first_below, scan_below};
use crate::planner::statistics::size_in_bytes;

/// The low end of Spark's guidance on bucket file sizes (roughly 128 MB to 1 GB each).
const SMALLEST_GOOD_BUCKET_FILE: u64 = 128 << 20;
/// A bucket holding this many times the mean bucket's rows is called skewed.
const SKEWED_BUCKET_FACTOR: f64 = 2.0;

pub(super) fn section(plan: &Arc<dyn ExecutionPlan>, root: &Node, conf: &SparkConf) -> Option<String> {
    let ids = OperatorIds::of(root);
    let mut advice = Vec::new();
    let mut tables: BTreeMap<i64, &TableMeta> = BTreeMap::new();
    visit(plan, false, &mut |node, under_exchange| {
        if let Some(join) = node.downcast_ref::<SparkJoinExec>() {
            advice.extend(join_advice(join, &ids, conf));
        }
        if let Some(scan) = node.downcast_ref::<FileSourceScanExec>() {
            if scan.bucket_spec().is_some() {
                tables.insert(scan.table().id, scan.table());
            }
            if !under_exchange {
                advice.extend(unneeded_bucketed_scan(scan, &ids));
            }
        }
    });
    for table in tables.values() {
        advice.extend(table_advice(table));
    }
    advice.dedup();
    (!advice.is_empty()).then(|| format!("\n== Advice (Bucketing) ==\n{}\n", advice.join("\n")))
}

/// Every operator, with whether an exchange lies above it.
fn visit<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    under_exchange: bool,
    f: &mut dyn FnMut(&'a Arc<dyn ExecutionPlan>, bool),
) {
    f(plan, under_exchange);
    let exchange = plan.is::<ShuffleExchangeExec>() || plan.is::<BroadcastExchangeExec>();
    for child in plan.children() {
        visit(child, under_exchange || exchange, f);
    }
}

/// EXPLAIN FORMATTED's operator ids of exchanges and scans, by the operator's address.
struct OperatorIds(BTreeMap<usize, usize>);

impl OperatorIds {
    /// An operator shown twice (in the final and the initial plan of an adaptive query that
    /// has run) keeps its first id, the final plan's.
    fn of(root: &Node) -> Self {
        let mut ids = BTreeMap::new();
        for node in post_order(root) {
            if let Some(operator) = node.exchange.or(node.origin) {
                ids.entry(operator).or_insert(node.id);
            }
        }
        OperatorIds(ids)
    }

    fn label<T>(&self, name: &str, operator: &T) -> String {
        match self.0.get(&address(operator)) {
            Some(id) => format!("{name} ({id})"),
            None => name.to_string(),
        }
    }
}

/// One input of a shuffled join: the exchange beneath it (if any), the table it reads and the
/// join keys by column name.
struct Side<'a> {
    plan: &'a Arc<dyn ExecutionPlan>,
    exchange: Option<&'a ShuffleExchangeExec>,
    scan: Option<&'a FileSourceScanExec>,
    keys: Option<Vec<String>>,
}

impl<'a> Side<'a> {
    fn of(plan: &'a Arc<dyn ExecutionPlan>, keys: &[Arc<dyn PhysicalExpr>]) -> Self {
        let keys = keys.iter().map(|k| k.downcast_ref::<Column>().map(|c| c.name().to_lowercase())).collect();
        Side { plan, exchange: first_below(plan), scan: scan_below(plan), keys }
    }

    fn table(&self) -> Option<String> {
        self.scan.map(|scan| table_name(scan.table()))
    }

    /// How the table's bucket columns compare with the join keys; `None` when the side reads
    /// no table, or a key is not a column.
    fn bucketing(&self) -> Option<Bucketing> {
        let scan = self.scan?;
        let keys = self.keys.as_ref()?;
        let Some(spec) = scan.bucket_spec() else { return Some(Bucketing::None) };
        let bucket_columns: Vec<String> = spec.bucket_columns.iter().map(|c| c.to_lowercase()).collect();
        let covered = |of: &[String], by: &[String]| of.iter().all(|c| by.contains(c));
        Some(match (covered(&bucket_columns, keys), covered(keys, &bucket_columns)) {
            (true, true) => Bucketing::ByKeys,
            (true, false) => Bucketing::ByFewerColumns,
            _ => Bucketing::ByOtherColumns,
        })
    }
}

/// A join side's table against its join keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bucketing {
    None,
    /// Bucketed by exactly the join keys.
    ByKeys,
    /// Bucketed by some of the join keys only.
    ByFewerColumns,
    /// Bucketed by a column that is not a join key.
    ByOtherColumns,
}

fn table_name(table: &TableMeta) -> String {
    if table.schema == DEFAULT_SCHEMA {
        format!("`{}`", table.name)
    } else {
        format!("`{}`.`{}`", table.schema, table.name)
    }
}

fn join_advice(join: &SparkJoinExec, ids: &OperatorIds, conf: &SparkConf) -> Vec<String> {
    if !join.spec().strategy.is_shuffled() {
        return Vec::new();
    }
    let left = Side::of(join.left(), &join.left_keys());
    let right = Side::of(join.right(), &join.right_keys());
    if left.exchange.is_none() && right.exchange.is_none() {
        return Vec::new();
    }
    let exchange = |side: &Side| ids.label("Exchange", side.exchange.expect("a shuffled side"));
    let mut advice = Vec::new();
    if let Some(broadcast) = broadcast_advice(join, [(&left, BuildSide::Left), (&right, BuildSide::Right)], conf) {
        advice.push(broadcast);
    }
    for side in [&left, &right] {
        let (Some(table), Some(keys), Some(spec)) = (side.table(), &side.keys, side.scan.and_then(|s| s.bucket_spec()))
        else {
            continue;
        };
        if side.exchange.is_none() {
            continue;
        }
        let (keys, bucket_columns) = (keys.join(", "), spec.bucket_columns.join(", "));
        match side.bucketing() {
            Some(Bucketing::ByOtherColumns) => advice.push(format!(
                "EnsureRequirements: this join is on ({keys}) but {table} is bucketed by ({bucket_columns}); a \
                 bucketed read only serves a join on all of its bucket columns, so {} shuffles it. Bucket {table} by \
                 ({keys}), or join on ({bucket_columns}) too.",
                exchange(side)
            )),
            Some(Bucketing::ByFewerColumns) if conf.require_all_cluster_keys_for_co_partition => advice.push(format!(
                "EnsureRequirements: this join is on ({keys}) and {table} is bucketed by ({bucket_columns}) only; \
                 under spark.sql.requireAllClusterKeysForCoPartition = true a side is joined in place only when \
                 partitioned by all of the join keys, so {} shuffles it. Bucket {table} by ({keys}), or SET \
                 spark.sql.requireAllClusterKeysForCoPartition = false.",
                exchange(side)
            )),
            _ => {}
        }
    }
    let one_sided = match (left.exchange, right.exchange) {
        (Some(_), None) => Some((&left, &right)),
        (None, Some(_)) => Some((&right, &left)),
        _ => None,
    };
    if let Some((shuffled, kept)) = one_sided
        && let (Some(table), Some(kept_scan)) = (shuffled.table(), kept.scan)
        && kept_scan.status() == BucketedStatus::Bucketed
    {
        let kept_table = kept.table().expect("a scan");
        let kept_buckets = kept_scan.coalesced_to().or(kept_scan.bucket_spec().map(|s| s.num_buckets)).unwrap_or(0);
        let keys = shuffled.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default();
        match (shuffled.bucketing(), shuffled.scan.and_then(|s| s.bucket_spec())) {
            (Some(Bucketing::None), _) => advice.push(format!(
                "EnsureRequirements: {} shuffles {table}, which is not bucketed, into the {kept_buckets} buckets of \
                 {kept_table}. Bucket {table} by ({keys}) INTO {kept_buckets} BUCKETS and the join reads both sides \
                 bucket to bucket, without this Exchange.",
                exchange(shuffled)
            )),
            (Some(Bucketing::ByKeys), Some(spec)) if spec.num_buckets != kept_buckets => {
                let (more, fewer) = (spec.num_buckets.max(kept_buckets), spec.num_buckets.min(kept_buckets));
                let coalescable = fewer > 0 && more % fewer == 0 && more / fewer <= conf.coalesce_max_bucket_ratio;
                if coalescable && !conf.coalesce_buckets_in_join {
                    advice.push(format!(
                        "CoalesceBucketsInJoin: {table} and {kept_table} are bucketed into {} and {kept_buckets} \
                         buckets, and {fewer} divides {more}: SET spark.sql.bucketing.coalesceBucketsInJoin.enabled \
                         = true reads the {more} buckets as {fewer} and removes {}.",
                        spec.num_buckets,
                        exchange(shuffled)
                    ));
                } else {
                    advice.push(format!(
                        "EnsureRequirements: {table} and {kept_table} are bucketed into {} and {kept_buckets} buckets, \
                         so {} shuffles {table} to match. Bucket {table} INTO {kept_buckets} BUCKETS to drop this \
                         Exchange.",
                        spec.num_buckets,
                        exchange(shuffled)
                    ));
                }
            }
            _ => {}
        }
    }
    if let (Some(l), Some(r)) = (left.exchange, right.exchange)
        && advice.is_empty()
        && let (Some(left_table), Some(right_table)) = (left.table(), right.table())
        && left.scan.and_then(|s| s.bucket_spec()).is_none()
        && right.scan.and_then(|s| s.bucket_spec()).is_none()
    {
        advice.push(format!(
            "EnsureRequirements: {} and {} shuffle {left_table} and {right_table} for this join. Bucket both by their \
             join keys (CLUSTERED BY ({}) and ({})) INTO the same number of BUCKETS and neither Exchange is needed.",
            ids.label("Exchange", l),
            ids.label("Exchange", r),
            left.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default(),
            right.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default()
        ));
    }
    advice
}

/// A side small enough for Spark's default broadcast threshold that the session's setting
/// keeps from being broadcast.
fn broadcast_advice(join: &SparkJoinExec, sides: [(&Side, BuildSide); 2], conf: &SparkConf) -> Option<String> {
    let threshold = conf.auto_broadcast_join_threshold;
    let default_threshold = SparkConf::default().auto_broadcast_join_threshold as u128;
    let (side, size) = sides
        .into_iter()
        .filter(|(_, build)| can_broadcast(*build, join.spec().join_type))
        .map(|(side, _)| (side, size_in_bytes(side.plan.as_ref())))
        .filter(|(_, size)| *size <= default_threshold && (threshold < 0 || *size > threshold as u128))
        .min_by_key(|(_, size)| *size)?;
    let what = side.table().map_or_else(|| "one side".to_string(), |t| format!("the {t} side"));
    let needed = size.div_ceil(1 << 20).max(1) << 20;
    let setting = if threshold < 0 {
        "broadcasts are off in this session (-1)".to_string()
    } else {
        format!("over this session's threshold of {}", bytes_to_string(threshold as u128))
    };
    Some(format!(
        "JoinSelection: {what} is estimated at {}, under Spark's default spark.sql.autoBroadcastJoinThreshold of {}, \
         but {setting}: SET spark.sql.autoBroadcastJoinThreshold = {needed} broadcasts it, and the join shuffles \
         neither side.",
        bytes_to_string(size),
        bytes_to_string(default_threshold)
    ))
}

/// A bucketed table read by file because nothing above its scan needs the buckets.
fn unneeded_bucketed_scan(scan: &FileSourceScanExec, ids: &OperatorIds) -> Option<String> {
    (scan.status() == BucketedStatus::DisabledByQueryPlanner).then(|| {
        format!(
            "DisableUnnecessaryBucketedScan: {} reads by file, not by bucket: nothing above it needs the buckets, and \
             reading by file spreads the work over more tasks. Nothing to fix; SET \
             spark.sql.sources.bucketing.autoBucketedScan.enabled = false reads by bucket anyway.",
            ids.label(&format!("Scan parquet {}", table_name(scan.table())), scan)
        )
    })
}

/// Skewed buckets and small bucket files, from the metastore's file list (and the declared
/// size, where the table has one).
fn table_advice(table: &TableMeta) -> Vec<String> {
    let Some(spec) = &table.bucket_spec else { return Vec::new() };
    let name = table_name(table);
    let summary = BucketSummary::of(spec.num_buckets, &table.files);
    let mut advice = Vec::new();
    if let (Some(skew), Some((bucket, share))) = (summary.skew(), summary.largest())
        && skew >= SKEWED_BUCKET_FACTOR
        && spec.num_buckets > 1
    {
        advice.push(format!(
            "Skew: bucket {bucket} of {name} holds {:.0}% of its rows, {skew:.1} times the mean bucket; the task \
             reading it runs longest. Bucket by columns whose values spread more evenly, or add one to CLUSTERED BY ({}).",
            share * 100.0,
            spec.bucket_columns.join(", ")
        ));
    }
    let (total, per_file) = match table.declared_size() {
        Some(total) => (total, total / u64::from(spec.num_buckets)),
        None => (table.files.iter().map(|f| f.byte_size).sum(), summary.mean_file_bytes().unwrap_or(0)),
    };
    let enough = total.div_ceil(SMALLEST_GOOD_BUCKET_FILE).max(1);
    if total > 0 && per_file < SMALLEST_GOOD_BUCKET_FILE && enough < u64::from(spec.num_buckets) {
        advice.push(format!(
            "Bucket sizing: the bucket files of {name} average {} (Spark's guidance: roughly 128 MB to 1 GB each), so \
             {} buckets are more than its {} need; about {enough} would do, with the same count on the tables it \
             joins.",
            bytes_to_string(u128::from(per_file)),
            spec.num_buckets,
            bytes_to_string(u128::from(total))
        ));
    }
    advice
}
