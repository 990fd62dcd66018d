//! EXPLAIN ANALYZE: after the formatted plan, what each operator measured while the query
//! ran — the figures Spark's UI shows: rows out, time, rows and bytes shuffled, spills, the
//! files and buckets each scan read, and the partitions each adaptive read made of a stage's.

use std::fmt::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::metrics::MetricValue;
use serde::Serialize;

use crate::exec::apart::ApartExec;
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::aqe_shuffle_read::ShufflePartitionSpec;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::hash_aggregate::{
    PARTITIONS_AGGREGATED_IN_FEW_GROUPS, PARTITIONS_AGGREGATED_IN_ORDER, PARTITIONS_HASH_AGGREGATED,
    SHUFFLE_PARTITIONS_AGGREGATED_APART,
};
use crate::exec::join::SHUFFLE_PARTITIONS_APART;
use crate::exec::parquet_reads::READ_REQUESTS;
use crate::exec::query_stage::TWIN_STAGE_READ;
use crate::exec::runtime_filter::{KEYS_GATHERED, ROWS_DROPPED};
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::adaptive::adaptive_spark_plan::AdaptiveSparkPlanExec;

/// The ways a sort's partition (`exec::sort`) and an aggregate's (`exec::hash_aggregate`) can
/// take, as their metrics name them and as told.
const PARTITION_WAYS: [(&str, &str); 6] = [
    ("partitions_in_order", "already in order"),
    ("partitions_radix_sorted", "radix-sorted"),
    ("partitions_sorted_externally", "sorted by comparison"),
    (PARTITIONS_AGGREGATED_IN_ORDER, "aggregated in order"),
    (PARTITIONS_AGGREGATED_IN_FEW_GROUPS, "aggregated in few groups"),
    (PARTITIONS_HASH_AGGREGATED, "hash-aggregated"),
];

pub fn metrics_section(plan: &Arc<dyn ExecutionPlan>, rows: usize, elapsed: Duration) -> String {
    let mut text =
        format!("\n== Metrics ==\nrows returned: {rows}, total time: {:.1} ms\n", elapsed.as_secs_f64() * 1000.0);
    let mut shuffled = 0;
    describe(plan.as_ref(), 0, &mut text, &mut shuffled);
    let _ = writeln!(text, "bytes shuffled by exchanges: {shuffled}");
    text
}

fn describe(plan: &dyn ExecutionPlan, depth: usize, text: &mut String, shuffled: &mut u64) {
    if plan.is::<CooperativeExec>() || plan.is::<ApartExec>() {
        for child in plan.children() {
            describe(child.as_ref(), depth, text, shuffled);
        }
        return;
    }
    let figures = figures(plan);
    *shuffled += figures.iter().filter(|f| f.name == BYTES_SHUFFLED).map(|f| f.value).sum::<u64>();
    let figures: Vec<String> = figures.iter().map(Figure::to_string).collect();
    let _ = writeln!(text, "{}{}: {}", "  ".repeat(depth), plan.name(), figures.join(", "));
    for child in plan.children() {
        describe(child.as_ref(), depth + 1, text, shuffled);
    }
}

/// One thing an operator measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub name: String,
    pub value: u64,
    pub unit: Unit,
    /// Said after the value (`coalesced (of 200)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Count,
    Bytes,
    Nanos,
}

impl Figure {
    fn new(name: impl Into<String>, value: usize, unit: Unit) -> Self {
        Figure { name: name.into(), value: value as u64, unit, detail: None }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unit {
            Unit::Nanos => write!(f, "{} {:.1} ms", self.name, self.value as f64 / 1e6)?,
            Unit::Count | Unit::Bytes => write!(f, "{} {}", self.name, self.value)?,
        }
        match &self.detail {
            Some(detail) => write!(f, " {detail}"),
            None => Ok(()),
        }
    }
}

const BYTES_SHUFFLED: &str = "bytes shuffled";

/// The order figures are told in; others follow.
const FIGURE_ORDER: [&str; 8] =
    ["output rows", "time", "join time", "build time", "rows shuffled", BYTES_SHUFFLED, "spills", "spilled bytes"];

/// What `plan` itself (not its inputs) has measured so far: read while it runs, the figures
/// grow.
pub fn figures(plan: &dyn ExecutionPlan) -> Vec<Figure> {
    let mut figures = Vec::new();
    if let Some(metrics) = plan.metrics() {
        let metrics = metrics.aggregate_by_name();
        // A join times its work as join (and build) time and leaves the compute time at 0.
        let join_timed =
            metrics.iter().any(|m| matches!(m.value(), MetricValue::Time { name, .. } if name == "join_time"));
        for metric in metrics.iter() {
            let value = metric.value();
            let n = value.as_usize();
            let figure = match value {
                MetricValue::OutputRows(_) => Figure::new("output rows", n, Unit::Count),
                MetricValue::ElapsedCompute(_) if join_timed => continue,
                MetricValue::ElapsedCompute(_) => Figure::new("time", n, Unit::Nanos),
                MetricValue::Time { name, .. } if name == "join_time" => Figure::new("join time", n, Unit::Nanos),
                MetricValue::Time { name, .. } if name == "build_time" => Figure::new("build time", n, Unit::Nanos),
                MetricValue::SpillCount(_) => Figure::new("spills", n, Unit::Count),
                MetricValue::SpilledBytes(_) => Figure::new("spilled bytes", n, Unit::Bytes),
                MetricValue::Count { name, .. } if name == "shuffle_bytes" => {
                    Figure::new(BYTES_SHUFFLED, n, Unit::Bytes)
                }
                MetricValue::Count { name, .. } if name == "shuffle_rows" => {
                    Figure::new("rows shuffled", n, Unit::Count)
                }
                MetricValue::Count { name, .. } if name == SHUFFLE_PARTITIONS_APART => {
                    Figure::new("shuffle partitions joined one by one", n, Unit::Count)
                }
                MetricValue::Count { name, .. } if name == TWIN_STAGE_READ => Figure {
                    detail: Some(
                        "in place of its own exchange, which did not run: the two differ only in null checks of \
                         columns that the files' statistics show hold no NULL"
                            .to_string(),
                    ),
                    ..Figure::new("read the output of stage", n, Unit::Count)
                },
                MetricValue::Count { name, .. } if name == KEYS_GATHERED => {
                    Figure::new("join keys gathered", n, Unit::Count)
                }
                MetricValue::Count { name, .. } if name == ROWS_DROPPED => {
                    Figure::new("rows dropped by the other side's keys", n, Unit::Count)
                }
                MetricValue::Count { name, .. } if name == SHUFFLE_PARTITIONS_AGGREGATED_APART => {
                    Figure::new("shuffle partitions aggregated one by one", n, Unit::Count)
                }
                // What a scan's pushed filters saved: row groups and pages their statistics
                // ruled out, and rows filtered while decoding (record-level filtering).
                MetricValue::PruningMetrics { name, pruning_metrics } if pruning_metrics.pruned() > 0 => {
                    match name.as_ref() {
                        "row_groups_pruned_statistics" => {
                            Figure::new("row groups skipped", pruning_metrics.pruned(), Unit::Count)
                        }
                        "page_index_pages_pruned" => {
                            Figure::new("pages skipped", pruning_metrics.pruned(), Unit::Count)
                        }
                        _ => continue,
                    }
                }
                MetricValue::Count { name, .. } if name == "pushdown_rows_pruned" && n > 0 => {
                    Figure::new("rows filtered while decoding", n, Unit::Count)
                }
                // What a scan fetched from its files (or its object store): bytes, and the
                // requests that fetched them.
                MetricValue::Count { name, .. } if name == "bytes_scanned" => {
                    Figure::new("bytes fetched", n, Unit::Bytes)
                }
                MetricValue::Count { name, .. } if name == READ_REQUESTS => {
                    Figure::new("read requests", n, Unit::Count)
                }
                MetricValue::Count { name, .. } => match PARTITION_WAYS.iter().find(|(way, _)| way == name) {
                    Some((_, way)) if n > 0 => Figure::new(format!("partitions {way}"), n, Unit::Count),
                    _ => continue,
                },
                _ => continue,
            };
            figures.push(figure);
        }
        // DataFusion keeps metrics in no set order; these read best in one.
        figures.sort_by_key(|f| FIGURE_ORDER.iter().position(|name| f.name == *name).unwrap_or(FIGURE_ORDER.len()));
    }
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        figures.push(Figure::new("files read", scan.files_read(), Unit::Count));
        if let Some(buckets) = scan.selected_bucket_count() {
            figures.push(Figure::new("buckets read", buckets, Unit::Count));
        }
    }
    if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
        let partitions = read.stage().statistics().partition_count();
        let detail = match read.kind() {
            "" => format!("(of {partitions})"),
            kind => format!("{kind} (of {partitions})"),
        };
        figures
            .push(Figure { detail: Some(detail), ..Figure::new("partitions read", read.specs().len(), Unit::Count) });
    }
    if plan.downcast_ref::<ShuffleExchangeExec>().is_some() && !figures.iter().any(|f| f.name == BYTES_SHUFFLED) {
        figures.push(Figure::new(BYTES_SHUFFLED, 0, Unit::Bytes));
    }
    figures
}

/// What a plan that ran did, summed over its operators: what the server's metrics and
/// `pg_stat_statements` count of each statement.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub rows_read: u64,
    pub bytes_read: u64,
    pub bytes_shuffled: u64,
    pub bytes_spilled: u64,
    /// Shuffle exchanges in the plan that ran (adaptive execution's final plan).
    pub exchanges: u64,
    /// Inputs of joins and aggregates read by bucket, with no exchange between: each one an
    /// exchange that bucketing saved.
    pub exchanges_avoided: u64,
    pub buckets_pruned: u64,
    pub partitions_coalesced: u64,
    /// Broadcasts adaptive execution added to the plan it started from.
    pub runtime_broadcasts: u64,
    pub skew_splits: u64,
}

pub fn totals(plan: &Arc<dyn ExecutionPlan>) -> Totals {
    let mut totals = Totals::default();
    add(plan.as_ref(), false, &mut totals);
    totals
}

/// Adds `plan`'s figures and its inputs'; `read_by_consumer` is whether a join or an
/// aggregate above reads `plan`'s partitions as they are, with no exchange between.
fn add(plan: &dyn ExecutionPlan, read_by_consumer: bool, totals: &mut Totals) {
    if let Some(metrics) = plan.metrics() {
        totals.bytes_spilled += metrics.spilled_bytes().unwrap_or(0) as u64;
        totals.bytes_shuffled += metrics
            .iter()
            .filter_map(|m| match m.value() {
                MetricValue::Count { name, count } if name == "shuffle_bytes" => Some(count.value() as u64),
                _ => None,
            })
            .sum::<u64>();
    }
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        totals.rows_read += plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0) as u64;
        totals.bytes_read += scan.bytes_read();
        if let (Some(spec), Some(selected)) = (scan.bucket_spec(), scan.selected_bucket_count()) {
            totals.buckets_pruned += u64::from(spec.num_buckets).saturating_sub(selected as u64);
        }
        if scan.is_bucketed() && read_by_consumer {
            totals.exchanges_avoided += 1;
        }
    }
    if plan.downcast_ref::<ShuffleExchangeExec>().is_some() {
        totals.exchanges += 1;
    }
    if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
        if read.has_coalesced() {
            let partitions = read.stage().statistics().partition_count();
            totals.partitions_coalesced += partitions.saturating_sub(read.specs().len()) as u64;
        }
        let mut skewed: Vec<usize> = read
            .specs()
            .iter()
            .filter_map(|spec| match spec {
                ShufflePartitionSpec::PartialReducer { partition, .. } => Some(*partition),
                _ => None,
            })
            .collect();
        skewed.dedup();
        totals.skew_splits += skewed.len() as u64;
    }
    if let Some(adaptive) = plan.downcast_ref::<AdaptiveSparkPlanExec>()
        && let Some(done) = adaptive.final_plan()
    {
        let broadcasts = |plan: &Arc<dyn ExecutionPlan>| {
            count(plan.as_ref(), &|p| p.downcast_ref::<BroadcastExchangeExec>().is_some())
        };
        totals.runtime_broadcasts += broadcasts(&done.plan).saturating_sub(broadcasts(adaptive.initial())) as u64;
    }
    let name = plan.name();
    let consumes = name.contains("Join") || name.contains("Aggregate");
    let passes_on = plan.downcast_ref::<ShuffleExchangeExec>().is_none()
        && plan.downcast_ref::<BroadcastExchangeExec>().is_none()
        && plan.downcast_ref::<AqeShuffleReadExec>().is_none();
    for child in plan.children() {
        add(child.as_ref(), consumes || (read_by_consumer && passes_on), totals);
    }
}

/// Operators of `plan` (itself included) that `matches`.
fn count(plan: &dyn ExecutionPlan, matches: &dyn Fn(&dyn ExecutionPlan) -> bool) -> usize {
    usize::from(matches(plan)) + plan.children().iter().map(|c| count(c.as_ref(), matches)).sum::<usize>()
}
