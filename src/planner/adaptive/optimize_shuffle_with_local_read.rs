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

#[cfg(test)]
mod tests {
    use datafusion::common::JoinType;
    use datafusion::physical_plan::aggregates::AggregateMode;

    use super::*;
    use crate::exec::aqe_shuffle_read::ShufflePartitionSpec;
    use crate::exec::broadcast_exchange::BroadcastExchangeExec;
    use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
    use crate::planner::test_fixtures::*;
    use ShufflePartitionSpec::{Coalesced, CoalescedMapper, PartialMapper};

    /// Two map tasks, four partitions.
    fn two_by_four(id: usize) -> Plan {
        hash_stage(id, "s", &["a"], vec![vec![10; 4], vec![10; 4]])
    }

    /// Four map tasks, two partitions.
    fn four_by_two(id: usize) -> Plan {
        hash_stage(id, "s", &["a"], vec![vec![10; 2]; 4])
    }

    fn read(stage: Plan, specs: Vec<ShufflePartitionSpec>) -> Plan {
        Arc::new(AqeShuffleReadExec::try_new(stage, specs).unwrap())
    }

    /// A broadcast hash join of `stream` with a broadcast scan, building `build`.
    fn broadcast_join(stream: Plan, build: BuildSide) -> Plan {
        let table = scan(table_of("b", ABC, None, 4, &[]));
        let broadcast: Plan = Arc::new(BroadcastExchangeExec::new(Arc::clone(&table), columns(&table, &["a"])));
        let (left, right) = match build {
            BuildSide::Left => (broadcast, stream),
            BuildSide::Right => (stream, broadcast),
        };
        let on = vec![(column(&left, "a"), column(&right, "a"))];
        join_on(JoinStrategy::BroadcastHash, Some(build), JoinType::Inner, left, right, on)
    }

    fn sort_merge_on_a(left: Plan, right: Plan) -> Plan {
        let (left_key, right_key) = (column(&left, "a"), column(&right, "a"));
        let (left, right) = (local_sort(left, Arc::clone(&left_key)), local_sort(right, Arc::clone(&right_key)));
        join(JoinStrategy::SortMerge, None, left, right, (left_key, right_key))
    }

    const PER_MAP_HALVES: &[ShufflePartitionSpec] = &[
        PartialMapper { map: 0, partitions: 0..2 },
        PartialMapper { map: 0, partitions: 2..4 },
        PartialMapper { map: 1, partitions: 0..2 },
        PartialMapper { map: 1, partitions: 2..4 },
    ];

    struct Case {
        name: &'static str,
        plan: fn() -> Plan,
        settings: &'static [(&'static str, &'static str)],
        /// Each stage and the specs it is read by (`None`: read as it is).
        expected: &'static [(usize, Option<&'static [ShufflePartitionSpec]>)],
    }

    /// Spark's `OptimizeShuffleWithLocalRead` (`getPartitionSpecs`): as many tasks as the stage
    /// is read with (its partitions, or the specs of a coalesced read); with at least as many as
    /// map tasks, each map task's partitions split `equallyDivide(partitions, tasks / maps)`,
    /// else the map tasks grouped `equallyDivide(maps, tasks)`.
    const CASES: &[Case] = &[
        Case {
            name: "a stage at the root (the input of a broadcast) is read locally",
            plan: || two_by_four(0),
            settings: &[],
            expected: &[(0, Some(PER_MAP_HALVES))],
        },
        Case {
            name: "the stream side of a broadcast hash join building right",
            plan: || broadcast_join(two_by_four(0), BuildSide::Right),
            settings: &[],
            expected: &[(0, Some(PER_MAP_HALVES))],
        },
        Case {
            name: "the stream side of a broadcast hash join building left",
            plan: || broadcast_join(two_by_four(0), BuildSide::Left),
            settings: &[],
            expected: &[(0, Some(PER_MAP_HALVES))],
        },
        Case {
            name: "a coalesced read of two tasks: one task per map task, all partitions",
            plan: || broadcast_join(read(two_by_four(0), vec![Coalesced(0..2), Coalesced(2..4)]), BuildSide::Right),
            settings: &[],
            expected: &[(
                0,
                Some(&[PartialMapper { map: 0, partitions: 0..4 }, PartialMapper { map: 1, partitions: 0..4 }]),
            )],
        },
        Case {
            name: "fewer partitions than map tasks: map tasks grouped",
            plan: || broadcast_join(four_by_two(0), BuildSide::Right),
            settings: &[],
            expected: &[(0, Some(&[CoalescedMapper(0..2), CoalescedMapper(2..4)]))],
        },
        Case {
            name: "a coalesced read of one task over four map tasks: one group of all",
            plan: || broadcast_join(read(four_by_two(0), vec![Coalesced(0..2)]), BuildSide::Right),
            settings: &[],
            expected: &[(0, Some(&[CoalescedMapper(0..4)]))],
        },
        Case {
            name: "spark.sql.adaptive.localShuffleReader.enabled=false",
            plan: || broadcast_join(two_by_four(0), BuildSide::Right),
            settings: &[("spark.sql.adaptive.localShuffleReader.enabled", "false")],
            expected: &[(0, None)],
        },
        Case {
            name: "a sort-merge join needs its stages' partitioning",
            plan: || sort_merge_on_a(two_by_four(0), two_by_four(1)),
            settings: &[],
            expected: &[(0, None), (1, None)],
        },
        Case {
            name: "an aggregate above needs the stream side's partitioning: no local read",
            plan: || {
                aggregate(AggregateMode::FinalPartitioned, broadcast_join(two_by_four(0), BuildSide::Right), &["a"])
            },
            settings: &[],
            expected: &[(0, None)],
        },
        Case {
            name: "a single-partition stage is not read locally",
            plan: || {
                let input = scan(table_of("s", ABC, None, 4, &[]));
                let single = Arc::new(ShuffleExchangeExec::new(input, ExchangePartitioning::Single, None));
                broadcast_join(stage(0, single, vec![vec![10], vec![10]]), BuildSide::Right)
            },
            settings: &[],
            expected: &[(0, None)],
        },
    ];

    #[test]
    fn shuffles_are_read_locally_where_spark_reads_them_locally() {
        for case in CASES {
            let planned = optimize_shuffle_with_local_read((case.plan)(), &conf(case.settings)).unwrap();
            let expected: Vec<_> = case.expected.iter().map(|(id, specs)| (*id, specs.map(<[_]>::to_vec))).collect();
            assert_eq!(read_specs(&planned), expected, "{}", case.name);
        }
    }
}
