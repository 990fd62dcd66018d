//! Spark's `DynamicJoinSelection`, and its `JoinSelection` again over finished stages: once a
//! side of a sort-merge (or shuffled hash) join has run as a shuffle stage, its measured size
//! decides the join, against `spark.sql.adaptive.autoBroadcastJoinThreshold` (by default the
//! static threshold).
//!
//! A side with most of its shuffle partitions empty is not broadcast (the sort-merge join
//! skips empty partitions cheaply); a side whose every partition fits a local hash map
//! prefers a shuffled hash join. A join that becomes a broadcast hash join loses the sorts
//! below it; its build side is broadcast from the stage, and an unfinished exchange on its
//! stream side goes, unless an operator above needs that partitioning.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;

use super::validate_requirements::is_valid;
use super::{bare_stage, below_sort, matching, replace_nth};
use crate::config::SparkConf;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinSpec, JoinStrategy};
use crate::exec::query_stage::ShuffleQueryStageExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::hints::{JoinHint, QueryHints};
use crate::planner::join_selection::{SideFacts, choose_strategy, side_hints};
use crate::planner::statistics::size_in_bytes;

/// `shouldDemoteBroadcastHashJoin`: fewer than `ratio` of the partitions hold any rows.
pub fn has_many_empty_partitions(bytes_by_partition: &[u64], ratio: f64) -> bool {
    let non_empty = bytes_by_partition.iter().filter(|b| **b > 0).count();
    !bytes_by_partition.is_empty() && non_empty > 0 && (non_empty as f64 / bytes_by_partition.len() as f64) < ratio
}

/// `preferShuffledHashJoin`: every partition within
/// `spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold`, which is itself at least the
/// advisory partition size (so the default 0 never applies).
pub fn fits_local_hash_maps(bytes_by_partition: &[u64], conf: &SparkConf) -> bool {
    let threshold = conf.max_shuffled_hash_join_local_map_threshold;
    conf.advisory_partition_size <= threshold && bytes_by_partition.iter().all(|b| *b <= threshold)
}

/// The hints a finished stage's statistics put on its side.
fn stage_hints(stage: &ShuffleQueryStageExec, conf: &SparkConf) -> HashSet<JoinHint> {
    let bytes = stage.statistics().bytes_by_partition();
    let mut hints = HashSet::new();
    if has_many_empty_partitions(&bytes, conf.non_empty_partition_ratio_for_broadcast_join) {
        hints.insert(JoinHint::NoBroadcastHash);
    }
    if fits_local_hash_maps(&bytes, conf) {
        hints.insert(JoinHint::PreferShuffleHash);
    }
    hints
}

/// The input of an exchange that has not run, else `plan`: what the side is without the
/// distribution the join asked for.
fn below_exchange(plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    plan.downcast_ref::<ShuffleExchangeExec>().map_or(plan, |e| e.input())
}

/// Re-plans each shuffled join with a finished shuffle stage for a side.
pub fn reselect_joins(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
    hints: &QueryHints,
) -> Result<Arc<dyn ExecutionPlan>> {
    let is_join = |node: &Arc<dyn ExecutionPlan>| node.is::<SparkJoinExec>();
    let mut plan = plan;
    for index in 0..matching(&plan, &is_join).len() {
        // Looked up again each time: a join above one already rewritten has been rebuilt.
        let Some(node) = matching(&plan, &is_join).into_iter().nth(index) else { break };
        let Some(join) = node.downcast_ref::<SparkJoinExec>() else { continue };
        for candidate in alternatives(join, conf, hints)? {
            let rewritten = replace_nth(&plan, &is_join, index, &candidate)?;
            if is_valid(&rewritten, conf) {
                tracing::debug!(join = candidate.name(), "adaptive execution re-planned a join with stage statistics");
                plan = rewritten;
                break;
            }
        }
    }
    Ok(plan)
}

/// What `join` becomes with its stages' statistics, most preferred first; none if it stays.
fn alternatives(join: &SparkJoinExec, conf: &SparkConf, hints: &QueryHints) -> Result<Vec<Arc<dyn ExecutionPlan>>> {
    let spec = join.spec();
    if !spec.strategy.is_shuffled() || spec.skew {
        return Ok(Vec::new());
    }
    let sides = [below_sort(join.left()), below_sort(join.right())];
    let stages = sides.map(bare_stage);
    if stages.iter().all(Option::is_none) {
        return Ok(Vec::new());
    }
    let facts = |side: &Arc<dyn ExecutionPlan>, stage: Option<&ShuffleQueryStageExec>| {
        let mut side_hints = side_hints(side, hints);
        match stage {
            Some(stage) => {
                side_hints.extend(stage_hints(stage, conf));
                SideFacts {
                    size: u128::from(stage.statistics().total_bytes()),
                    broadcast_threshold: conf.adaptive_broadcast_threshold(),
                    hints: side_hints,
                }
            }
            None => SideFacts {
                size: size_in_bytes(side.as_ref()),
                broadcast_threshold: conf.auto_broadcast_join_threshold,
                hints: side_hints,
            },
        }
    };
    let (left, right) = (facts(sides[0], stages[0]), facts(sides[1], stages[1]));
    let (strategy, build_side) = choose_strategy(spec.join_type, true, &left, &right, conf);
    let new_spec = JoinSpec { strategy, build_side, ..spec.clone() };
    let join_of = |left: &Arc<dyn ExecutionPlan>, right: &Arc<dyn ExecutionPlan>| -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(SparkJoinExec::try_new(new_spec.clone(), Arc::clone(left), Arc::clone(right))?))
    };
    match (strategy, build_side) {
        (JoinStrategy::BroadcastHash, Some(build)) => {
            let (build_index, keys) = match build {
                BuildSide::Left => (0, join.left_keys()),
                BuildSide::Right => (1, join.right_keys()),
            };
            let broadcast: Arc<dyn ExecutionPlan> =
                Arc::new(BroadcastExchangeExec::new(Arc::clone(below_exchange(sides[build_index])), keys));
            let stream = sides[1 - build_index];
            // Without the stream side's exchange if it has not run, else (or if that breaks a
            // distribution above) with it.
            let mut streams = vec![below_exchange(stream)];
            if !Arc::ptr_eq(streams[0], stream) {
                streams.push(stream);
            }
            streams
                .into_iter()
                .map(|stream| match build {
                    BuildSide::Left => join_of(&broadcast, stream),
                    BuildSide::Right => join_of(stream, &broadcast),
                })
                .collect()
        }
        (JoinStrategy::ShuffledHash, _) if spec.strategy != strategy || spec.build_side != build_side => {
            Ok(vec![join_of(sides[0], sides[1])?])
        }
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_mostly_empty_is_not_broadcast() {
        // 10 of 200 partitions hold rows: under 20%.
        let mut bytes = vec![0u64; 200];
        bytes.iter_mut().take(10).for_each(|b| *b = 16);
        assert!(has_many_empty_partitions(&bytes, 0.2));
        bytes.iter_mut().take(100).for_each(|b| *b = 16);
        assert!(!has_many_empty_partitions(&bytes, 0.2));
        // An empty side is not demoted: it is the cheapest broadcast of all.
        assert!(!has_many_empty_partitions(&[0, 0, 0], 0.2));
    }

    #[test]
    fn local_hash_maps_need_a_threshold_above_the_advisory_size() {
        let mut conf = SparkConf::default();
        assert!(!fits_local_hash_maps(&[0, 0], &conf), "the default threshold 0 is off");
        conf.max_shuffled_hash_join_local_map_threshold = 64 << 20;
        assert!(fits_local_hash_maps(&[10, 64 << 20], &conf));
        assert!(!fits_local_hash_maps(&[10, (64 << 20) + 1], &conf));
    }
}
