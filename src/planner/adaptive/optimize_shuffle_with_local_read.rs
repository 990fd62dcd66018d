//! Spark's `OptimizeShuffleWithLocalRead`: where nothing needs a finished shuffle's
//! partitioning any more — the stage is broadcast, or it is the stream side of a broadcast
//! hash join — its output is read map task by map task (a local read) rather than partition
//! by partition, so no rows travel between tasks for it. Kept only where the plan's
//! distributions still hold.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use super::shuffle_partitions_util::local_read_specs;
use super::validate_requirements::is_valid;
use super::{StageRead, matching, replace_nth};
use crate::config::SparkConf;
use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinStrategy};

pub fn optimize_shuffle_with_local_read(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.local_shuffle_reader_enabled {
        return Ok(plan);
    }
    if let Some(local) = local_read(&plan)? {
        return Ok(local);
    }
    let optimized = probe_side_local_reads(&plan)?;
    Ok(if is_valid(&optimized, conf) { optimized } else { plan })
}

/// The stream side of each broadcast hash join read locally, where it is a shuffle stage.
fn probe_side_local_reads(plan: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let is_join = |node: &Arc<dyn ExecutionPlan>| {
        node.downcast_ref::<SparkJoinExec>()
            .is_some_and(|j| j.spec().strategy == JoinStrategy::BroadcastHash && !j.spec().skew)
    };
    let mut plan = Arc::clone(plan);
    for index in 0..matching(&plan, &is_join).len() {
        // Looked up again each time: a join above one already rewritten has been rebuilt.
        let Some(node) = matching(&plan, &is_join).into_iter().nth(index) else { break };
        let Some(join) = node.downcast_ref::<SparkJoinExec>() else { continue };
        let (left, right) = (Arc::clone(join.left()), Arc::clone(join.right()));
        let children = match join.spec().build_side {
            Some(BuildSide::Right) => local_read(&left)?.map(|local| vec![local, right]),
            _ => local_read(&right)?.map(|local| vec![left, local]),
        };
        if let Some(children) = children {
            plan = replace_nth(&plan, &is_join, index, &replace_children_if_necessary(Arc::clone(&node), children)?)?;
        }
    }
    Ok(plan)
}

/// A local read of `plan`, if it is a shuffle stage (or a read of one) that allows it: as many
/// tasks as the partitions read so far.
fn local_read(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(read) = StageRead::of(plan) else { return Ok(None) };
    let statistics = read.stage.statistics();
    if !read.is_supported() || read.read.is_some_and(AqeShuffleReadExec::is_local) || statistics.map_count() == 0 {
        return Ok(None);
    }
    let partitions = statistics.partition_count();
    let parallelism = read.read.map_or(partitions, |r| r.specs().len());
    let specs = local_read_specs(statistics.map_count(), partitions, parallelism);
    Ok(Some(Arc::new(AqeShuffleReadExec::try_new(Arc::clone(read.node), specs)?)))
}
