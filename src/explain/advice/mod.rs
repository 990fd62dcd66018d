//! `== Advice (Bucketing) ==`: after EXPLAIN FORMATTED's text, what a user can change so that
//! an exchange goes away or the buckets serve better, each line naming the rule or guideline
//! it concerns and the fix. Spark applies these rules without saying which one a query broke.
//!
//! Judged from the plan, the session's settings and the metastore (each file's bucket, rows
//! and bytes, and declared statistics), never from the data. The plan is ours ([`local`]) or
//! Spark's own, for a statement that runs on Spark ([`spark`]): each is read into the same
//! [`Facts`], which the rules here weigh.

mod local;
mod spark;

use std::collections::BTreeMap;

use datafusion::common::JoinType;

use super::cost::bytes_to_string;
use crate::catalog::bucket_summary::BucketSummary;
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::catalog::table::{BucketSpec, TableMeta};
use crate::config::SparkConf;
use crate::exec::file_source_scan::BucketedStatus;
use crate::exec::join_spec::BuildSide;
use crate::planner::join_selection::can_broadcast;
pub(super) use local::section;
pub(super) use spark::spark_section;

/// The low end of Spark's guidance on bucket file sizes (roughly 128 MB to 1 GB each).
const SMALLEST_GOOD_BUCKET_FILE: u64 = 128 << 20;
/// A bucket holding this many times the mean bucket's rows is called skewed.
const SKEWED_BUCKET_FACTOR: f64 = 2.0;

/// What the advice weighs in a plan.
#[derive(Default)]
struct Facts<'a> {
    /// Sort-merge and shuffled hash joins.
    joins: Vec<ShuffledJoin<'a>>,
    /// Scans of bucketed tables that read by file because nothing above them needs the
    /// buckets, with no exchange above them, as the plan labels them.
    unneeded_bucketed_scans: Vec<String>,
    /// The bucketed tables the plan reads, by id.
    tables: BTreeMap<i64, &'a TableMeta>,
}

/// A join that needs both sides partitioned by its keys.
struct ShuffledJoin<'a> {
    join_type: JoinType,
    left: Side<'a>,
    right: Side<'a>,
}

/// One input of a shuffled join: the exchange beneath it (if any), the table it reads, the
/// join keys by column name and Spark's estimate of its size.
struct Side<'a> {
    /// As the plan labels it: `Exchange (4)`.
    exchange: Option<String>,
    scan: Option<Scan<'a>>,
    /// `None` where a key is not a column.
    keys: Option<Vec<String>>,
    size: u128,
}

/// The table scan a join side reads through single-input operators.
struct Scan<'a> {
    table: &'a TableMeta,
    status: BucketedStatus,
    /// The buckets it reads: the table's, or as many as they are coalesced into.
    buckets: u32,
}

impl Side<'_> {
    fn table(&self) -> Option<String> {
        self.scan.as_ref().map(|scan| table_name(scan.table))
    }

    fn bucket_spec(&self) -> Option<&BucketSpec> {
        self.scan.as_ref().and_then(|s| s.table.bucket_spec.as_ref())
    }

    /// How the table's bucket columns compare with the join keys; `None` when the side reads
    /// no table, or a key is not a column.
    fn bucketing(&self) -> Option<Bucketing> {
        self.scan.as_ref()?;
        let keys = self.keys.as_ref()?;
        let Some(spec) = self.bucket_spec() else { return Some(Bucketing::None) };
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

/// The section for the plan `facts` describe.
fn advise(facts: &Facts, conf: &SparkConf) -> Option<String> {
    let mut advice: Vec<String> = facts.joins.iter().flat_map(|join| join_advice(join, conf)).collect();
    advice.extend(facts.unneeded_bucketed_scans.iter().map(|scan| unneeded_bucketed_scan(scan)));
    for table in facts.tables.values() {
        advice.extend(table_advice(table));
    }
    advice.dedup();
    (!advice.is_empty()).then(|| format!("\n== Advice (Bucketing) ==\n{}\n", advice.join("\n")))
}

fn join_advice(join: &ShuffledJoin, conf: &SparkConf) -> Vec<String> {
    let (left, right) = (&join.left, &join.right);
    if left.exchange.is_none() && right.exchange.is_none() {
        return Vec::new();
    }
    let exchange = |side: &Side| side.exchange.clone().expect("a shuffled side");
    let mut advice = Vec::new();
    if let Some(broadcast) =
        broadcast_advice(join.join_type, [(left, BuildSide::Left), (right, BuildSide::Right)], conf)
    {
        advice.push(broadcast);
    }
    for side in [left, right] {
        let (Some(table), Some(keys), Some(spec)) = (side.table(), &side.keys, side.bucket_spec()) else {
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
    let one_sided = match (&left.exchange, &right.exchange) {
        (Some(_), None) => Some((left, right)),
        (None, Some(_)) => Some((right, left)),
        _ => None,
    };
    if let Some((shuffled, kept)) = one_sided
        && let (Some(table), Some(kept_scan)) = (shuffled.table(), kept.scan.as_ref())
        && kept_scan.status == BucketedStatus::Bucketed
    {
        let kept_table = table_name(kept_scan.table);
        let kept_buckets = kept_scan.buckets;
        let keys = shuffled.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default();
        match (shuffled.bucketing(), shuffled.bucket_spec()) {
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
    if let (Some(l), Some(r)) = (&left.exchange, &right.exchange)
        && advice.is_empty()
        && let (Some(left_table), Some(right_table)) = (left.table(), right.table())
        && left.bucket_spec().is_none()
        && right.bucket_spec().is_none()
    {
        advice.push(format!(
            "EnsureRequirements: {l} and {r} shuffle {left_table} and {right_table} for this join. Bucket both by their \
             join keys (CLUSTERED BY ({}) and ({})) INTO the same number of BUCKETS and neither Exchange is needed.",
            left.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default(),
            right.keys.as_ref().map(|k| k.join(", ")).unwrap_or_default()
        ));
    }
    advice
}

/// A side small enough for Spark's default broadcast threshold that the session's setting
/// keeps from being broadcast.
fn broadcast_advice(join_type: JoinType, sides: [(&Side, BuildSide); 2], conf: &SparkConf) -> Option<String> {
    let threshold = conf.auto_broadcast_join_threshold;
    let default_threshold = SparkConf::default().auto_broadcast_join_threshold as u128;
    let (side, size) = sides
        .into_iter()
        .filter(|(_, build)| can_broadcast(*build, join_type))
        .map(|(side, _)| (side, side.size))
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
fn unneeded_bucketed_scan(scan: &str) -> String {
    format!(
        "DisableUnnecessaryBucketedScan: {scan} reads by file, not by bucket: nothing above it needs the buckets, and \
         reading by file spreads the work over more tasks. Nothing to fix; SET \
         spark.sql.sources.bucketing.autoBucketedScan.enabled = false reads by bucket anyway."
    )
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
