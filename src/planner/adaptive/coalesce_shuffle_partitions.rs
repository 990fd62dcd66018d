//! Spark's `CoalesceShufflePartitions`: the plan of a stage about to run reads its finished
//! shuffle stages with small partitions coalesced, so that fewer, fuller tasks run.
//!
//! Shuffle stages read by the same operator (both sides of a join) are coalesced together,
//! with the same specs, so that partition `i` of each still meets partition `i` of the other;
//! the inputs of a union are coalesced independently, unless the union keeps their shared
//! hash partitioning (`union_output_partitioning`, DataFusion's `InterleaveExec`): its
//! partition `i` is partition `i` of every input, so they are coalesced together, as the sides
//! of a join are. Nothing is coalesced where an operator also reads something other than
//! stages (a bucketed scan keeps its buckets, and the stage beside it their count), nor a
//! single-partition shuffle. With
//! `spark.sql.adaptive.coalescePartitions.parallelismFirst` the target size is lowered to keep
//! at least as many partitions as cores (shared among the groups by size), down to
//! `spark.sql.adaptive.coalescePartitions.minPartitionSize`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use super::shuffle_partitions_util::coalesce_partitions;
use super::{StageRead, is_query_stage};
use crate::config::SparkConf;
use crate::exec::aqe_shuffle_read::{AqeShuffleReadExec, ShufflePartitionSpec};

/// `plan` with its shuffle stages read coalesced; `parallelism` is the number of cores.
pub fn coalesce_shuffle_partitions(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
    parallelism: usize,
) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.coalesce_partitions_enabled {
        return Ok(plan);
    }
    let min_partitions = if conf.coalesce_parallelism_first { parallelism.max(1) } else { 1 };
    let mut groups = Vec::new();
    coalesce_groups(&plan, &mut groups);
    let group_bytes: Vec<u64> =
        groups.iter().map(|group| group.iter().map(|read| read.stage.statistics().total_bytes()).sum()).collect();
    let total_bytes: u64 = group_bytes.iter().sum();
    let mut new_specs: HashMap<usize, Vec<ShufflePartitionSpec>> = HashMap::new();
    for (group, bytes) in groups.iter().zip(&group_bytes) {
        // Each group gets a share of the parallelism by its size.
        let group_min = match (groups.len(), total_bytes) {
            (1, _) | (_, 0) => min_partitions,
            _ => ((min_partitions as f64 * *bytes as f64 / total_bytes as f64).round() as usize).max(1),
        };
        let sizes: Vec<Vec<u64>> = group.iter().map(|read| read.stage.statistics().bytes_by_partition()).collect();
        let specs: Vec<Option<Vec<ShufflePartitionSpec>>> =
            group.iter().map(|read| read.read.map(|r| r.specs().to_vec())).collect();
        let coalesced = coalesce_partitions(
            &sizes,
            &specs,
            conf.advisory_partition_size,
            group_min,
            conf.coalesce_min_partition_size,
        );
        for (read, specs) in group.iter().zip(coalesced.into_iter().flatten()) {
            new_specs.insert(read.stage.id(), specs);
        }
    }
    if new_specs.is_empty() { Ok(plan) } else { update_reads(&plan, &new_specs) }
}

/// Spark's `collectCoalesceGroups`: the shuffle stages that must be coalesced together.
fn coalesce_groups<'a>(plan: &'a Arc<dyn ExecutionPlan>, groups: &mut Vec<Vec<StageRead<'a>>>) {
    if let Some(read) = StageRead::of(plan) {
        if read.is_supported() {
            groups.push(vec![read]);
        }
        return;
    }
    if is_query_stage(plan) {
        return;
    }
    let children = plan.children();
    if plan.is::<UnionExec>() {
        children.into_iter().for_each(|child| coalesce_groups(child, groups));
        return;
    }
    if let [child] = children.as_slice() {
        return coalesce_groups(child, groups);
    }
    if only_stages_below(plan) {
        let mut reads = Vec::new();
        stage_reads(plan, &mut reads);
        if reads.iter().all(StageRead::is_supported) {
            groups.push(reads);
        }
    }
}

/// Whether every leaf of `plan` is a finished stage (Spark's `collectLeaves` being query stages).
fn only_stages_below(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if is_query_stage(plan) {
        return true;
    }
    let children = plan.children();
    !children.is_empty() && children.into_iter().all(only_stages_below)
}

fn stage_reads<'a>(plan: &'a Arc<dyn ExecutionPlan>, reads: &mut Vec<StageRead<'a>>) {
    if let Some(read) = StageRead::of(plan) {
        reads.push(read);
    } else if !is_query_stage(plan) {
        plan.children().into_iter().for_each(|child| stage_reads(child, reads));
    }
}

/// `plan` with each stage in `new_specs` read by its new specs.
fn update_reads(
    plan: &Arc<dyn ExecutionPlan>,
    new_specs: &HashMap<usize, Vec<ShufflePartitionSpec>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(read) = StageRead::of(plan) {
        return match new_specs.get(&read.stage.id()) {
            Some(specs) => Ok(Arc::new(AqeShuffleReadExec::try_new(Arc::clone(read.node), specs.clone())?)),
            None => Ok(Arc::clone(plan)),
        };
    }
    if is_query_stage(plan) {
        return Ok(Arc::clone(plan));
    }
    let children =
        plan.children().into_iter().map(|child| update_reads(child, new_specs)).collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(Arc::clone(plan), children)
}

#[cfg(test)]
mod tests {
    use datafusion::physical_plan::aggregates::AggregateMode;
    use datafusion::physical_plan::union::InterleaveExec;

    use super::*;
    use crate::exec::join_spec::JoinStrategy;
    use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
    use crate::planner::test_fixtures::*;
    use ShufflePartitionSpec::Coalesced;

    const MB: u64 = 1 << 20;

    /// Four partitions of 2 MiB over two map tasks.
    fn small(id: usize, table: &str) -> Plan {
        hash_stage(id, table, &["a"], vec![vec![MB; 4], vec![MB; 4]])
    }

    fn sort_merge_on_a(left: Plan, right: Plan) -> Plan {
        let (left_key, right_key) = (column(&left, "a"), column(&right, "a"));
        let left = local_sort(left, Arc::clone(&left_key));
        let right = local_sort(right, Arc::clone(&right_key));
        join(JoinStrategy::SortMerge, None, left, right, (left_key, right_key))
    }

    struct Case {
        name: &'static str,
        /// A stage's plan about to run, over finished shuffle stages.
        plan: fn() -> Plan,
        /// Cores.
        parallelism: usize,
        settings: &'static [(&'static str, &'static str)],
        /// Each stage and the specs it is read by (`None`: read as it is).
        expected: &'static [(usize, Option<&'static [ShufflePartitionSpec]>)],
    }

    /// Spark's `CoalesceShufflePartitions` (`CoalesceShufflePartitionsSuite`): the stages read
    /// by one operator are coalesced together, the inputs of a union apart, nothing where a leaf
    /// is not a stage or a stage is a single partition; the target size is
    /// `max(min(ceil(total / minPartitions), advisory), minPartitionSize)`, `minPartitions`
    /// being the cores with `parallelismFirst`, shared among the groups by size.
    const CASES: &[Case] = &[
        Case {
            name: "an aggregate's stage of 8 MiB on one core: one partition",
            plan: || aggregate(AggregateMode::FinalPartitioned, small(0, "t"), &["a"]),
            parallelism: 1,
            settings: &[],
            expected: &[(0, Some(&[Coalesced(0..4)]))],
        },
        Case {
            name: "parallelism first: two cores, two partitions of 4 MiB",
            plan: || aggregate(AggregateMode::FinalPartitioned, small(0, "t"), &["a"]),
            parallelism: 2,
            settings: &[],
            expected: &[(0, Some(&[Coalesced(0..2), Coalesced(2..4)]))],
        },
        Case {
            name: "parallelism first, but not under spark.sql.adaptive.coalescePartitions.minPartitionSize",
            plan: || aggregate(AggregateMode::FinalPartitioned, small(0, "t"), &["a"]),
            parallelism: 8,
            settings: &[("spark.sql.adaptive.coalescePartitions.minPartitionSize", "4MB")],
            expected: &[(0, Some(&[Coalesced(0..2), Coalesced(2..4)]))],
        },
        Case {
            name: "parallelism first off: the advisory size alone",
            plan: || aggregate(AggregateMode::FinalPartitioned, small(0, "t"), &["a"]),
            parallelism: 8,
            settings: &[("spark.sql.adaptive.coalescePartitions.parallelismFirst", "false")],
            expected: &[(0, Some(&[Coalesced(0..4)]))],
        },
        Case {
            name: "spark.sql.adaptive.coalescePartitions.enabled=false",
            plan: || aggregate(AggregateMode::FinalPartitioned, small(0, "t"), &["a"]),
            parallelism: 1,
            settings: &[("spark.sql.adaptive.coalescePartitions.enabled", "false")],
            expected: &[(0, None)],
        },
        Case {
            name: "empty partitions are skipped",
            plan: || {
                let stage = hash_stage(0, "t", &["a"], vec![vec![0, MB, 0, 0, MB, 0]]);
                aggregate(AggregateMode::FinalPartitioned, stage, &["a"])
            },
            parallelism: 1,
            settings: &[],
            expected: &[(0, Some(&[Coalesced(0..6)]))],
        },
        Case {
            name: "a join's stages are coalesced together, by their summed sizes",
            plan: || {
                let left = hash_stage(0, "l", &["a"], vec![vec![10 * MB, 10 * MB, 40 * MB, 10 * MB]]);
                let right = hash_stage(1, "r", &["a"], vec![vec![10 * MB; 4]]);
                sort_merge_on_a(left, right)
            },
            parallelism: 1,
            settings: &[],
            expected: &[
                (0, Some(&[Coalesced(0..2), Coalesced(2..3), Coalesced(3..4)])),
                (1, Some(&[Coalesced(0..2), Coalesced(2..3), Coalesced(3..4)])),
            ],
        },
        Case {
            name: "a stage joined with a bucketed scan keeps its partitions",
            plan: || {
                let bucketed = scan(table_of("b", ABC, Some((4, &["a"])), 1, &[]));
                sort_merge_on_a(small(0, "t"), bucketed)
            },
            parallelism: 1,
            settings: &[],
            expected: &[(0, None)],
        },
        Case {
            name: "a single-partition stage is not coalesced",
            plan: || {
                let input = scan(table_of("t", ABC, None, 4, &[]));
                let single = Arc::new(ShuffleExchangeExec::new(input, ExchangePartitioning::Single, None));
                aggregate(AggregateMode::Final, stage(0, single, vec![vec![MB], vec![MB]]), &[])
            },
            parallelism: 1,
            settings: &[],
            expected: &[(0, None)],
        },
        Case {
            name: "the inputs of a union are coalesced apart, each with a share of the cores",
            plan: || UnionExec::try_new(vec![small(0, "l"), small(1, "r")]).unwrap(),
            parallelism: 2,
            settings: &[],
            expected: &[(0, Some(&[Coalesced(0..4)])), (1, Some(&[Coalesced(0..4)]))],
        },
        Case {
            name: "the inputs of a union keeping their hash partitioning are coalesced together (ours)",
            plan: || Arc::new(InterleaveExec::try_new(vec![small(0, "l"), small(1, "r")]).unwrap()),
            parallelism: 2,
            settings: &[],
            expected: &[(0, Some(&[Coalesced(0..2), Coalesced(2..4)])), (1, Some(&[Coalesced(0..2), Coalesced(2..4)]))],
        },
    ];

    #[test]
    fn partitions_are_coalesced_as_spark_coalesces_them() {
        for case in CASES {
            let planned = coalesce_shuffle_partitions((case.plan)(), &conf(case.settings), case.parallelism).unwrap();
            let expected: Vec<_> = case.expected.iter().map(|(id, specs)| (*id, specs.map(<[_]>::to_vec))).collect();
            assert_eq!(read_specs(&planned), expected, "{}", case.name);
        }
    }
}
