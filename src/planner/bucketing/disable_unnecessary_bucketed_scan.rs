//! Spark's `DisableUnnecessaryBucketedScan`: a bucketed scan costs parallelism (one task per
//! bucket) and buys nothing unless an operator above needs its distribution. Walking down
//! from the root, an operator requiring a clustered or all-tuples distribution makes the
//! scans below it "interesting"; an exchange below such an operator makes them
//! uninteresting again unless only sorts, projections, filters and partial aggregates stand
//! between. A scan that is not interesting reads without buckets
//! (`Bucketed: false (disabled by query planner)`); bucket pruning still applies.
//! Runs after `EnsureRequirements`, when `spark.sql.sources.bucketing.autoBucketedScan.enabled`.

use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;

use crate::config::SparkConf;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::distribution::required_distributions;
use crate::planner::union_output_partitioning::with_new_inputs;

pub fn disable_unnecessary_bucketed_scan(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.bucketing_enabled || !conf.auto_bucketed_scan {
        return Ok(plan);
    }
    walk(plan, false, false, true)
}

/// Operators that keep a bucketed distribution useful below an exchange.
fn is_allowed(plan: &dyn ExecutionPlan) -> bool {
    plan.downcast_ref::<SortExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<AggregateExec>().is_some_and(|a| *a.mode() == AggregateMode::Partial)
}

fn walk(
    plan: Arc<dyn ExecutionPlan>,
    interesting: bool,
    exchange: bool,
    allowed: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        if scan.is_bucketed() && (!interesting || (exchange && allowed)) {
            return Ok(Arc::new(scan.with_status(BucketedStatus::DisabledByQueryPlanner)?));
        }
        return Ok(plan);
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let required = required_distributions(plan.as_ref());
    let (interesting, exchange, allowed) = if required.iter().any(|d| d.is_interesting()) {
        (true, false, true)
    } else if plan.downcast_ref::<ShuffleExchangeExec>().is_some() {
        (interesting, true, allowed)
    } else {
        (interesting, exchange, allowed && is_allowed(plan.as_ref()))
    };
    let new_children =
        children.iter().map(|c| walk(Arc::clone(c), interesting, exchange, allowed)).collect::<Result<Vec<_>>>()?;
    if new_children.iter().zip(&children).all(|(a, b)| Arc::ptr_eq(a, b)) {
        return Ok(plan);
    }
    with_new_inputs(plan, new_children)
}
