//! Spark's `CoalesceBucketsInJoin`: when two bucketed tables are joined on their bucket keys
//! with bucket counts where one divides the other (ratio at most
//! `spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio`), the side with more buckets
//! is read as if it had fewer — coalesced bucket `i` holds buckets `b` with `b % n == i` —
//! so no exchange is needed. Off unless `spark.sql.bucketing.coalesceBucketsInJoin.enabled`.
//! Applies to sort-merge and shuffled hash joins whose sides are only filters and projections
//! over a bucketed scan; for a shuffled hash join only the stream side may be coalesced.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::physical_exprs_contains;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning, replace_children_if_necessary};

use crate::config::SparkConf;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinStrategy};

pub fn coalesce_buckets_in_join(plan: Arc<dyn ExecutionPlan>, conf: &SparkConf) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.coalesce_buckets_in_join {
        return Ok(plan);
    }
    plan.transform_up(|node| {
        let Some(join) = node.downcast_ref::<SparkJoinExec>() else {
            return Ok(Transformed::no(node));
        };
        if !join.spec().strategy.is_shuffled() {
            return Ok(Transformed::no(node));
        }
        let (Some(left), Some(right)) =
            (bucket_count(join.left(), &join.left_keys()), bucket_count(join.right(), &join.right_keys()))
        else {
            return Ok(Transformed::no(node));
        };
        if left == right {
            return Ok(Transformed::no(node));
        }
        let (larger, smaller) = (left.max(right), left.min(right));
        if larger % smaller != 0 || larger / smaller > conf.coalesce_max_bucket_ratio {
            return Ok(Transformed::no(node));
        }
        let coalesce_left = left > right;
        // A shuffled hash join may only coalesce its stream side.
        if join.spec().strategy == JoinStrategy::ShuffledHash {
            let build = join.spec().build_side;
            if (coalesce_left && build == Some(BuildSide::Left)) || (!coalesce_left && build == Some(BuildSide::Right))
            {
                return Ok(Transformed::no(node));
            }
        }
        let (new_left, new_right) = if coalesce_left {
            (coalesce(join.left(), smaller)?, Arc::clone(join.right()))
        } else {
            (Arc::clone(join.left()), coalesce(join.right(), smaller)?)
        };
        Ok(Transformed::yes(replace_children_if_necessary(Arc::clone(&node), vec![new_left, new_right])?))
    })
    .map(|t| t.data)
}

/// The bucket count of a side that is filters and projections over a bucketed scan
/// partitioned exactly on join keys.
fn bucket_count(
    side: &Arc<dyn ExecutionPlan>,
    keys: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>],
) -> Option<u32> {
    if let Some(scan) = side.downcast_ref::<FileSourceScanExec>() {
        if !scan.is_bucketed() || scan.coalesced_to().is_some() {
            return None;
        }
    } else if side.downcast_ref::<FilterExec>().is_none() && side.downcast_ref::<ProjectionExec>().is_none() {
        return None;
    } else {
        bucket_count(side.children()[0], keys)?;
    }
    match side.output_partitioning() {
        Partitioning::Hash(exprs, n)
            if exprs.len() == keys.len() && exprs.iter().all(|e| physical_exprs_contains(keys, e)) =>
        {
            u32::try_from(*n).ok()
        }
        _ => None,
    }
}

/// Rebuilds a side with its scan coalesced to `buckets`.
fn coalesce(side: &Arc<dyn ExecutionPlan>, buckets: u32) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = side.downcast_ref::<FileSourceScanExec>() {
        return Ok(Arc::new(scan.with_coalesced_buckets(buckets)?));
    }
    let child = coalesce(side.children()[0], buckets)?;
    replace_children_if_necessary(Arc::clone(side), vec![child])
}
