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
                    size: u128::from(stage.statistics().data_size()),
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
    use datafusion::common::JoinType;

    use super::*;
    use crate::planner::test_fixtures::*;

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

    const MB: u64 = 1 << 20;

    /// A stage of four partitions holding `bytes` in all, over two map tasks.
    fn even(id: usize, table: &str, bytes: u64) -> Plan {
        hash_stage(id, table, &["a"], vec![vec![bytes / 8; 4], vec![bytes / 8; 4]])
    }

    /// A stage of ten partitions holding `bytes`, all in one partition.
    fn mostly_empty(id: usize, table: &str, bytes: u64) -> Plan {
        let mut partitions = vec![0; 10];
        partitions[3] = bytes;
        hash_stage(id, table, &["a"], vec![partitions])
    }

    /// An exchange that has not run, over a table of `bytes`.
    fn unfinished(table: &str, bytes: u64) -> Plan {
        exchange(scan(sized(table_of(table, ABC, None, 4, &[]), bytes)), &["a"], 4)
    }

    fn sort_merge(join_type: JoinType, left: Plan, right: Plan) -> Plan {
        let (left_key, right_key) = (column(&left, "a"), column(&right, "a"));
        let (left, right) = (local_sort(left, Arc::clone(&left_key)), local_sort(right, Arc::clone(&right_key)));
        join_on(JoinStrategy::SortMerge, None, join_type, left, right, vec![(left_key, right_key)])
    }

    struct Case {
        name: &'static str,
        plan: fn() -> Plan,
        settings: &'static [(&'static str, &'static str)],
        /// The join's strategy and build side, and each side's exchanges as `movement` gives them.
        expected: (JoinStrategy, Option<BuildSide>, &'static str, &'static str),
    }

    const SMJ: (JoinStrategy, Option<BuildSide>) = (JoinStrategy::SortMerge, None);

    /// Spark's adaptive re-planning of a sort-merge join over finished stages: `JoinSelection`
    /// with the stages' measured sizes against `spark.sql.adaptive.autoBroadcastJoinThreshold`
    /// (by default the static threshold), and `DynamicJoinSelection`'s hints: no broadcast of a
    /// side with most partitions empty, a shuffled hash join where every partition fits
    /// `spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold`.
    const CASES: &[Case] = &[
        Case {
            name: "inner join, the left stage small: broadcast it",
            plan: || sort_merge(JoinType::Inner, even(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Left), "broadcast", ""),
        },
        Case {
            name: "inner join, the right stage small: broadcast it",
            plan: || sort_merge(JoinType::Inner, even(0, "l", 100 * MB), even(1, "r", MB)),
            settings: &[],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Right), "", "broadcast"),
        },
        Case {
            name: "both stages large",
            plan: || sort_merge(JoinType::Inner, even(0, "l", 100 * MB), even(1, "r", 100 * MB)),
            settings: &[],
            expected: (SMJ.0, SMJ.1, "", ""),
        },
        Case {
            name: "left outer join, the left stage small: the left is never built",
            plan: || sort_merge(JoinType::Left, even(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[],
            expected: (SMJ.0, SMJ.1, "", ""),
        },
        Case {
            name: "most partitions of the small stage empty: not broadcast",
            plan: || sort_merge(JoinType::Inner, mostly_empty(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[],
            expected: (SMJ.0, SMJ.1, "", ""),
        },
        Case {
            name: "most partitions empty, spark.sql.adaptive.nonEmptyPartitionRatioForBroadcastJoin=0",
            plan: || sort_merge(JoinType::Inner, mostly_empty(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[("spark.sql.adaptive.nonEmptyPartitionRatioForBroadcastJoin", "0")],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Left), "broadcast", ""),
        },
        Case {
            name: "spark.sql.adaptive.autoBroadcastJoinThreshold=-1",
            plan: || sort_merge(JoinType::Inner, even(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[("spark.sql.adaptive.autoBroadcastJoinThreshold", "-1")],
            expected: (SMJ.0, SMJ.1, "", ""),
        },
        Case {
            name: "the static threshold off, the adaptive one set: measured sizes use the adaptive one",
            plan: || sort_merge(JoinType::Inner, even(0, "l", MB), even(1, "r", 100 * MB)),
            settings: &[
                ("spark.sql.autoBroadcastJoinThreshold", "-1"),
                ("spark.sql.adaptive.autoBroadcastJoinThreshold", "10MB"),
            ],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Left), "broadcast", ""),
        },
        Case {
            name: "every partition within maxShuffledHashJoinLocalMapThreshold: a shuffled hash join building the smaller",
            plan: || sort_merge(JoinType::Inner, even(0, "l", 100 * MB), even(1, "r", 40 * MB)),
            settings: &[("spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold", "128MB")],
            expected: (JoinStrategy::ShuffledHash, Some(BuildSide::Right), "", ""),
        },
        Case {
            name: "maxShuffledHashJoinLocalMapThreshold under the advisory partition size: no preference",
            plan: || sort_merge(JoinType::Inner, even(0, "l", 100 * MB), even(1, "r", 40 * MB)),
            settings: &[("spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold", "32MB")],
            expected: (SMJ.0, SMJ.1, "", ""),
        },
        Case {
            name: "one side finished and small: broadcast, and the other side's exchange is not run",
            plan: || sort_merge(JoinType::Inner, even(0, "l", MB), unfinished("r", 100 << 20)),
            settings: &[],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Left), "broadcast", ""),
        },
        Case {
            name: "one side finished and large, the other estimated small: broadcast the estimated side",
            plan: || sort_merge(JoinType::Inner, even(0, "l", 100 * MB), unfinished("r", MB)),
            settings: &[],
            expected: (JoinStrategy::BroadcastHash, Some(BuildSide::Right), "", "broadcast"),
        },
    ];

    #[test]
    fn joins_are_replanned_with_stage_sizes_as_spark_replans_them() {
        for case in CASES {
            let planned = reselect_joins((case.plan)(), &conf(case.settings), &QueryHints::default()).unwrap();
            let join = planned.downcast_ref::<SparkJoinExec>().expect("a join");
            let found = (join.spec().strategy, join.spec().build_side, movement(join.left()), movement(join.right()));
            let expected = (case.expected.0, case.expected.1, case.expected.2.to_string(), case.expected.3.to_string());
            assert_eq!(found, expected, "{}", case.name);
        }
    }
}
