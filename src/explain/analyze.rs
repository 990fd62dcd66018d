//! EXPLAIN ANALYZE: after the formatted plan, what each operator measured while the query
//! ran — the figures Spark's UI shows: rows out, time, rows and bytes shuffled, spills, the
//! files and buckets each scan read, and the partitions each adaptive read made of a stage's.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::metrics::MetricValue;

use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;

/// The ways a sort's partition can take (`exec::sort`), as its metrics name them and as told.
const SORT_WAYS: [(&str, &str); 3] = [
    ("partitions_in_order", "already in order"),
    ("partitions_radix_sorted", "radix-sorted"),
    ("partitions_sorted_externally", "sorted by comparison"),
];

pub fn metrics_section(plan: &Arc<dyn ExecutionPlan>, rows: usize, elapsed: Duration) -> String {
    let mut text =
        format!("\n== Metrics ==\nrows returned: {rows}, total time: {:.1} ms\n", elapsed.as_secs_f64() * 1000.0);
    let mut shuffled = 0usize;
    describe(plan.as_ref(), 0, &mut text, &mut shuffled);
    let _ = writeln!(text, "bytes shuffled by exchanges: {shuffled}");
    text
}

fn describe(plan: &dyn ExecutionPlan, depth: usize, text: &mut String, shuffled: &mut usize) {
    if plan.downcast_ref::<CooperativeExec>().is_some() {
        for child in plan.children() {
            describe(child.as_ref(), depth, text, shuffled);
        }
        return;
    }
    let mut figures = Vec::new();
    if let Some(metrics) = plan.metrics() {
        let metrics = metrics.aggregate_by_name();
        // A join times its work as join (and build) time and leaves the compute time at 0.
        let join_timed =
            metrics.iter().any(|m| matches!(m.value(), MetricValue::Time { name, .. } if name == "join_time"));
        for metric in metrics.iter() {
            let value = metric.value();
            let millis = value.as_usize() as f64 / 1e6;
            let figure = match value {
                MetricValue::OutputRows(_) => format!("output rows {}", value.as_usize()),
                MetricValue::ElapsedCompute(_) if join_timed => continue,
                MetricValue::ElapsedCompute(_) => format!("time {millis:.1} ms"),
                MetricValue::Time { name, .. } if name == "join_time" => format!("join time {millis:.1} ms"),
                MetricValue::Time { name, .. } if name == "build_time" => format!("build time {millis:.1} ms"),
                MetricValue::SpillCount(_) => format!("spills {}", value.as_usize()),
                MetricValue::SpilledBytes(_) => format!("spilled bytes {}", value.as_usize()),
                MetricValue::Count { name, .. } if name == "shuffle_bytes" => {
                    *shuffled += value.as_usize();
                    format!("bytes shuffled {}", value.as_usize())
                }
                MetricValue::Count { name, .. } if name == "shuffle_rows" => {
                    format!("rows shuffled {}", value.as_usize())
                }
                MetricValue::Count { name, .. } => match SORT_WAYS.iter().find(|(n, _)| n == name) {
                    Some((_, way)) if value.as_usize() > 0 => format!("partitions {way} {}", value.as_usize()),
                    _ => continue,
                },
                _ => continue,
            };
            figures.push(figure);
        }
    }
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        figures.push(format!("files read {}", scan.files_read()));
        if let Some(buckets) = scan.selected_bucket_count() {
            figures.push(format!("buckets read {buckets}"));
        }
    }
    if let Some(read) = plan.downcast_ref::<AqeShuffleReadExec>() {
        let kind = match read.kind() {
            "" => String::new(),
            kind => format!(" {kind}"),
        };
        let partitions = read.stage().statistics().partition_count();
        figures.push(format!("partitions read {}{kind} (of {partitions})", read.specs().len()));
    }
    if plan.downcast_ref::<ShuffleExchangeExec>().is_some() && !figures.iter().any(|f| f.starts_with("bytes shuffled"))
    {
        figures.push("bytes shuffled 0".to_string());
    }
    let _ = writeln!(text, "{}{}: {}", "  ".repeat(depth), plan.name(), figures.join(", "));
    for child in plan.children() {
        describe(child.as_ref(), depth + 1, text, shuffled);
    }
}
