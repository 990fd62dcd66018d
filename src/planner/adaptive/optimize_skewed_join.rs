//! Spark's `OptimizeSkewedJoin`: in a sort-merge or shuffled hash join of two finished
//! shuffle stages, a partition far larger than the others — over
//! `spark.sql.adaptive.skewJoin.skewedPartitionFactor` times the median and over
//! `spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes` — is split by ranges of map
//! tasks into pieces of about the target size, and each piece is joined with the whole
//! matching partition of the other side (read once per piece). Only sides whose rows may be
//! split without changing the result are split: the left of inner, left outer, semi and anti
//! joins, the right of inner and right outer joins. The join's output is then partitioned by
//! nothing, so the split is not made where an operator above needs that partitioning.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::error::Result;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use super::shuffle_partitions_util::skew_partition_specs;
use super::validate_requirements::is_valid;
use super::{bare_stage, below_sort, matching, replace_nth};
use crate::config::SparkConf;
use crate::exec::aqe_shuffle_read::{AqeShuffleReadExec, ShufflePartitionSpec};
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::JoinSpec;

pub fn optimize_skewed_join(plan: Arc<dyn ExecutionPlan>, conf: &SparkConf) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.skew_join_enabled {
        return Ok(plan);
    }
    let is_join = |node: &Arc<dyn ExecutionPlan>| node.is::<SparkJoinExec>();
    let mut plan = plan;
    for index in 0..matching(&plan, &is_join).len() {
        let Some(node) = matching(&plan, &is_join).into_iter().nth(index) else { break };
        let Some(join) = node.downcast_ref::<SparkJoinExec>() else { continue };
        let Some(split) = split_join(join, conf)? else { continue };
        let rewritten = replace_nth(&plan, &is_join, index, &split)?;
        if is_valid(&rewritten, conf) {
            tracing::debug!("adaptive execution split skewed partitions of a join");
            plan = rewritten;
        }
    }
    Ok(plan)
}

/// `join` with its skewed partitions split, if it is a shuffled join of two stages with any.
fn split_join(join: &SparkJoinExec, conf: &SparkConf) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let spec = join.spec();
    if !spec.strategy.is_shuffled() || spec.skew {
        return Ok(None);
    }
    let (left, right) = (below_sort(join.left()), below_sort(join.right()));
    let (Some(left_stage), Some(right_stage)) = (bare_stage(left), bare_stage(right)) else { return Ok(None) };
    let partitions = left_stage.statistics().partition_count();
    if right_stage.statistics().partition_count() != partitions {
        return Ok(None);
    }
    let can_split = (
        matches!(spec.join_type, JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti),
        matches!(spec.join_type, JoinType::Inner | JoinType::Right),
    );
    let sizes = (left_stage.statistics().bytes.as_slice(), right_stage.statistics().bytes.as_slice());
    let Some((left_specs, right_specs)) = split_skewed_partitions(sizes, partitions, can_split, conf) else {
        return Ok(None);
    };
    // The reads go where the stages were, under the sorts of a sort-merge join.
    let reread = |side: &Arc<dyn ExecutionPlan>,
                  stage: &Arc<dyn ExecutionPlan>,
                  specs|
     -> Result<Arc<dyn ExecutionPlan>> {
        let read: Arc<dyn ExecutionPlan> = Arc::new(AqeShuffleReadExec::try_new(Arc::clone(stage), specs)?);
        if Arc::ptr_eq(side, stage) { Ok(read) } else { replace_children_if_necessary(Arc::clone(side), vec![read]) }
    };
    let new_left = reread(join.left(), left, left_specs)?;
    let new_right = reread(join.right(), right, right_specs)?;
    let spec = JoinSpec { skew: true, ..spec.clone() };
    Ok(Some(Arc::new(SparkJoinExec::try_new(spec, new_left, new_right)?)))
}

/// Each partition's bytes over all map tasks (`sizes[map][partition]`).
fn by_partition(sizes: &[Vec<u64>], partitions: usize) -> Vec<u64> {
    (0..partitions).map(|p| sizes.iter().map(|map| map.get(p).copied().unwrap_or(0)).sum()).collect()
}

/// Spark's `Utils.median`, at least 1.
fn median(sizes: &[u64]) -> u64 {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let median = match n {
        0 => 0,
        _ if n.is_multiple_of(2) => (sorted[n / 2] + sorted[n / 2 - 1]) / 2,
        _ => sorted[n / 2],
    };
    median.max(1)
}

/// One side of a join as the skew split sees it.
struct SkewSide<'a> {
    /// Bytes by map task and partition.
    maps: &'a [Vec<u64>],
    sizes: Vec<u64>,
    /// Partitions larger than this are skewed.
    threshold: u64,
    /// The size the pieces of a skewed partition aim at.
    target: u64,
    can_split: bool,
}

impl<'a> SkewSide<'a> {
    fn new(maps: &'a [Vec<u64>], partitions: usize, can_split: bool, conf: &SparkConf) -> Self {
        let sizes = by_partition(maps, partitions);
        let threshold =
            conf.skewed_partition_threshold.max((median(&sizes) as f64 * conf.skewed_partition_factor) as u64);
        // The pieces aim at the average partition that is not skewed, at least the advisory size.
        let not_skewed: Vec<u64> = sizes.iter().copied().filter(|s| *s <= threshold).collect();
        let average = if not_skewed.is_empty() { 0 } else { not_skewed.iter().sum::<u64>() / not_skewed.len() as u64 };
        SkewSide { maps, sizes, threshold, target: conf.advisory_partition_size.max(average), can_split }
    }
}

/// The specs both sides of a join are read by once skewed partitions are split (the side that
/// is not split reads its partition once per piece), or `None` if no partition is split.
/// `sizes` are each side's bytes by map task and partition; `can_split` says which sides may be.
pub fn split_skewed_partitions(
    sizes: (&[Vec<u64>], &[Vec<u64>]),
    partitions: usize,
    can_split: (bool, bool),
    conf: &SparkConf,
) -> Option<(Vec<ShufflePartitionSpec>, Vec<ShufflePartitionSpec>)> {
    if !(can_split.0 || can_split.1) || partitions == 0 {
        return None;
    }
    let sides =
        [SkewSide::new(sizes.0, partitions, can_split.0, conf), SkewSide::new(sizes.1, partitions, can_split.1, conf)];
    let mut specs: [Vec<ShufflePartitionSpec>; 2] = [Vec::new(), Vec::new()];
    let mut split_any = false;
    for partition in 0..partitions {
        let pieces = sides.each_ref().map(|side| {
            let whole = vec![ShufflePartitionSpec::Coalesced(partition..partition + 1)];
            if !side.can_split || side.sizes[partition] <= side.threshold {
                return whole;
            }
            let map_sizes: Vec<u64> = side.maps.iter().map(|map| map.get(partition).copied().unwrap_or(0)).collect();
            skew_partition_specs(partition, &map_sizes, side.target).unwrap_or(whole)
        });
        split_any |= pieces.iter().any(|p| p.len() > 1);
        for left in &pieces[0] {
            for right in &pieces[1] {
                specs[0].push(left.clone());
                specs[1].push(right.clone());
            }
        }
    }
    let [left, right] = specs;
    split_any.then_some((left, right))
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::exec::join_spec::JoinStrategy;
    use crate::planner::test_fixtures::*;
    use ShufflePartitionSpec::{Coalesced, PartialReducer};

    fn conf(threshold: u64, advisory: u64) -> SparkConf {
        SparkConf { skewed_partition_threshold: threshold, advisory_partition_size: advisory, ..SparkConf::default() }
    }

    #[test]
    fn a_skewed_partition_is_split_and_the_other_side_read_per_piece() {
        // Two map tasks; partition 1 holds 10 times the median on the left.
        let left = vec![vec![5, 50, 5, 5], vec![5, 50, 5, 5]];
        let right = vec![vec![5, 5, 5, 5], vec![5, 5, 5, 5]];
        let (l, r) = split_skewed_partitions((&left, &right), 4, (true, true), &conf(20, 10)).unwrap();
        assert_eq!(
            l,
            vec![
                Coalesced(0..1),
                PartialReducer { partition: 1, maps: 0..1 },
                PartialReducer { partition: 1, maps: 1..2 },
                Coalesced(2..3),
                Coalesced(3..4)
            ]
        );
        assert_eq!(r, vec![Coalesced(0..1), Coalesced(1..2), Coalesced(1..2), Coalesced(2..3), Coalesced(3..4)]);
    }

    #[test]
    fn both_thresholds_must_be_passed_and_the_side_splittable() {
        let left = vec![vec![5, 50, 5, 5], vec![5, 50, 5, 5]];
        let right = vec![vec![5, 5, 5, 5], vec![5, 5, 5, 5]];
        // 100 bytes is not over the size threshold.
        assert_eq!(split_skewed_partitions((&left, &right), 4, (true, true), &conf(100, 10)), None);
        // Five times the median (10) is 50: partition 1 (100) is over it, but not a right outer join's left side.
        assert_eq!(split_skewed_partitions((&left, &right), 4, (false, true), &conf(20, 10)), None);
        // One map task: nothing to split by.
        let one_map = vec![vec![10, 100, 10, 10]];
        assert_eq!(split_skewed_partitions((&one_map, &one_map), 4, (true, true), &conf(20, 10)), None);
    }

    #[test]
    fn medians_as_spark_computes_them() {
        assert_eq!(median(&[1, 9, 3]), 3);
        assert_eq!(median(&[1, 9, 3, 5]), 4);
        assert_eq!(median(&[0, 0]), 1);
    }

    /// Partition 1 of two map tasks holds 100 bytes, ten times the others.
    fn skewed(id: usize, table: &str) -> Plan {
        hash_stage(id, table, &["a"], vec![vec![5, 50, 5, 5], vec![5, 50, 5, 5]])
    }

    fn even(id: usize, table: &str) -> Plan {
        hash_stage(id, table, &["a"], vec![vec![5; 4], vec![5; 4]])
    }

    fn shuffled_join(strategy: JoinStrategy, join_type: JoinType, left: Plan, right: Plan) -> Plan {
        let (left_key, right_key) = (column(&left, "a"), column(&right, "a"));
        let (left, right, build) = match strategy {
            JoinStrategy::SortMerge => {
                (local_sort(left, Arc::clone(&left_key)), local_sort(right, Arc::clone(&right_key)), None)
            }
            _ => (left, right, Some(crate::exec::join_spec::BuildSide::Right)),
        };
        join_on(strategy, build, join_type, left, right, vec![(left_key, right_key)])
    }

    fn sort_merge(join_type: JoinType, left: Plan, right: Plan) -> Plan {
        shuffled_join(JoinStrategy::SortMerge, join_type, left, right)
    }

    /// The skewed partition split in two by map task, and the other side's partition 1 read
    /// once for each piece.
    const SPLIT: &[ShufflePartitionSpec] = &[
        Coalesced(0..1),
        PartialReducer { partition: 1, maps: 0..1 },
        PartialReducer { partition: 1, maps: 1..2 },
        Coalesced(2..3),
        Coalesced(3..4),
    ];
    const REPEATED: &[ShufflePartitionSpec] =
        &[Coalesced(0..1), Coalesced(1..2), Coalesced(1..2), Coalesced(2..3), Coalesced(3..4)];

    /// 20 bytes make a partition skewed (if over 5 times the median); pieces aim at 10.
    const SMALL: &[(&str, &str)] = &[
        ("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "20"),
        ("spark.sql.adaptive.advisoryPartitionSizeInBytes", "10"),
    ];

    struct Case {
        name: &'static str,
        plan: fn() -> Plan,
        settings: &'static [(&'static str, &'static str)],
        /// The read specs of the left and the right stage, `None` where nothing is split.
        expected: Option<(&'static [ShufflePartitionSpec], &'static [ShufflePartitionSpec])>,
    }

    /// Spark's `OptimizeSkewedJoin` over a whole plan: a sort-merge or shuffled hash join of two
    /// stages, the sides a join type lets be split (left of inner, left outer, semi, anti;
    /// right of inner and right outer), kept only if no distribution above breaks.
    const PLANS: &[Case] = &[
        Case {
            name: "inner join, the left skewed",
            plan: || sort_merge(JoinType::Inner, skewed(0, "l"), even(1, "r")),
            settings: SMALL,
            expected: Some((SPLIT, REPEATED)),
        },
        Case {
            name: "inner join, the right skewed",
            plan: || sort_merge(JoinType::Inner, even(0, "l"), skewed(1, "r")),
            settings: SMALL,
            expected: Some((REPEATED, SPLIT)),
        },
        Case {
            name: "spark.sql.adaptive.skewJoin.enabled=false",
            plan: || sort_merge(JoinType::Inner, skewed(0, "l"), even(1, "r")),
            settings: &[
                ("spark.sql.adaptive.skewJoin.enabled", "false"),
                ("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "20"),
                ("spark.sql.adaptive.advisoryPartitionSizeInBytes", "10"),
            ],
            expected: None,
        },
        Case {
            name: "under spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
            plan: || sort_merge(JoinType::Inner, skewed(0, "l"), even(1, "r")),
            settings: &[("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "100")],
            expected: None,
        },
        Case {
            name: "left outer join, the left skewed",
            plan: || sort_merge(JoinType::Left, skewed(0, "l"), even(1, "r")),
            settings: SMALL,
            expected: Some((SPLIT, REPEATED)),
        },
        Case {
            name: "left outer join, the right skewed: not split",
            plan: || sort_merge(JoinType::Left, even(0, "l"), skewed(1, "r")),
            settings: SMALL,
            expected: None,
        },
        Case {
            name: "right outer join, the right skewed",
            plan: || sort_merge(JoinType::Right, even(0, "l"), skewed(1, "r")),
            settings: SMALL,
            expected: Some((REPEATED, SPLIT)),
        },
        Case {
            name: "right outer join, the left skewed: not split",
            plan: || sort_merge(JoinType::Right, skewed(0, "l"), even(1, "r")),
            settings: SMALL,
            expected: None,
        },
        Case {
            name: "left semi join, the left skewed",
            plan: || sort_merge(JoinType::LeftSemi, skewed(0, "l"), even(1, "r")),
            settings: SMALL,
            expected: Some((SPLIT, REPEATED)),
        },
        Case {
            name: "left anti join, the right skewed: not split",
            plan: || sort_merge(JoinType::LeftAnti, even(0, "l"), skewed(1, "r")),
            settings: SMALL,
            expected: None,
        },
        Case {
            name: "full outer join: neither side is split",
            plan: || sort_merge(JoinType::Full, skewed(0, "l"), skewed(1, "r")),
            settings: SMALL,
            expected: None,
        },
        Case {
            name: "shuffled hash join, the left skewed",
            plan: || shuffled_join(JoinStrategy::ShuffledHash, JoinType::Inner, skewed(0, "l"), even(1, "r")),
            settings: SMALL,
            expected: Some((SPLIT, REPEATED)),
        },
        Case {
            name: "an aggregate above needs the join's partitioning: not split",
            plan: || {
                let join = sort_merge(JoinType::Inner, skewed(0, "l"), even(1, "r"));
                aggregate(datafusion::physical_plan::aggregates::AggregateMode::FinalPartitioned, join, &["a"])
            },
            settings: SMALL,
            expected: None,
        },
    ];

    #[test]
    fn skewed_joins_are_split_where_spark_splits_them() {
        for case in PLANS {
            let planned =
                optimize_skewed_join((case.plan)(), &crate::planner::test_fixtures::conf(case.settings)).unwrap();
            let expected = match case.expected {
                Some((left, right)) => vec![(0, Some(left.to_vec())), (1, Some(right.to_vec()))],
                None => vec![(0, None), (1, None)],
            };
            assert_eq!(read_specs(&planned), expected, "{}", case.name);
            let joins = matching(&planned, &|node| node.is::<SparkJoinExec>());
            let skew = joins[0].downcast_ref::<SparkJoinExec>().unwrap().spec().skew;
            assert_eq!(skew, case.expected.is_some(), "{}: the join is marked a skew join", case.name);
        }
    }
}
