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

#[cfg(test)]
mod tests {
    use datafusion::common::JoinType;

    use super::*;
    use crate::exec::broadcast_exchange::BroadcastExchangeExec;
    use crate::planner::test_fixtures::*;

    /// A join side: a scan of a table bucketed by `columns` into `buckets`, under what `wrap` puts
    /// above it.
    #[derive(Clone, Copy)]
    struct Side {
        buckets: u32,
        columns: &'static [&'static str],
        wrap: Wrap,
    }

    #[derive(Clone, Copy)]
    enum Wrap {
        Nothing,
        /// A filter and a projection, which Spark's `ExtractJoinWithBuckets` looks through.
        FilterAndProject,
        /// An exchange on `a` into the bucket count: no longer a scan operation.
        Exchange,
    }

    const fn on(buckets: u32, columns: &'static [&'static str]) -> Side {
        Side { buckets, columns, wrap: Wrap::Nothing }
    }

    impl Side {
        fn build(self, name: &str) -> Plan {
            let scan = scan(table_of(name, ABC, Some((self.buckets, self.columns)), 1, &[]));
            match self.wrap {
                Wrap::Nothing => scan,
                Wrap::FilterAndProject => project(not_null(scan, "a"), &["a", "b", "c"]),
                Wrap::Exchange => exchange(scan, &["a"], self.buckets as usize),
            }
        }
    }

    const ENABLED: &[(&str, &str)] = &[("spark.sql.bucketing.coalesceBucketsInJoin.enabled", "true")];
    const RATIO_2: &[(&str, &str)] = &[
        ("spark.sql.bucketing.coalesceBucketsInJoin.enabled", "true"),
        ("spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio", "2"),
    ];

    struct Case {
        name: &'static str,
        strategy: JoinStrategy,
        build_side: Option<BuildSide>,
        left: Side,
        right: Side,
        keys: (&'static [&'static str], &'static [&'static str]),
        settings: &'static [(&'static str, &'static str)],
        /// The bucket count each side's scan is read as, where it is coalesced.
        expected: (Option<u32>, Option<u32>),
    }

    const SMJ: JoinStrategy = JoinStrategy::SortMerge;
    const SHJ: JoinStrategy = JoinStrategy::ShuffledHash;

    /// Spark's `CoalesceBucketsInJoinSuite`. Each case that is not a shuffled hash join is also
    /// run with its sides swapped, as the suite does.
    const CASES: &[Case] = &[
        Case {
            name: "4 and 8 buckets, sort-merge join: the 8 are read as 4",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "4 and 8 buckets, shuffled hash join building the 4 side: the stream side is coalesced",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "off by default (spark.sql.bucketing.coalesceBucketsInJoin.enabled)",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: (None, None),
        },
        Case {
            name: "off by default, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: &[],
            expected: (None, None),
        },
        Case {
            name: "a shuffled hash join's build side is never coalesced",
            strategy: SHJ,
            build_side: Some(BuildSide::Right),
            left: on(4, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "the same bucket counts: nothing to coalesce",
            strategy: SMJ,
            build_side: None,
            left: on(8, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "the same bucket counts, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(8, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "3 does not divide 8",
            strategy: SMJ,
            build_side: None,
            left: on(3, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "3 does not divide 8, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(3, &["a"]),
            right: on(8, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "a ratio of 4 over maxBucketRatio 2",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a"]),
            right: on(16, &["a"]),
            keys: (&["a"], &["a"]),
            settings: RATIO_2,
            expected: (None, None),
        },
        Case {
            name: "a ratio of 4 over maxBucketRatio 2, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a"]),
            right: on(16, &["a"]),
            keys: (&["a"], &["a"]),
            settings: RATIO_2,
            expected: (None, None),
        },
        Case {
            name: "a ratio of 4 within the default maxBucketRatio 4",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a"]),
            right: on(16, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "a ratio of 8 over the default maxBucketRatio 4",
            strategy: SMJ,
            build_side: None,
            left: on(2, &["a"]),
            right: on(16, &["a"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "join keys missing a bucket column",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "join keys missing a bucket column, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "join keys with a column more than the buckets",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["a", "b", "c"], &["a", "b", "c"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "join keys with a column more than the buckets, shuffled hash join",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["a", "b", "c"], &["a", "b", "c"]),
            settings: ENABLED,
            expected: (None, None),
        },
        Case {
            name: "join keys the bucket columns in another order: coalesced (EnsureRequirements reorders)",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["b", "a"], &["b", "a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "join keys in another order, shuffled hash join building the left",
            strategy: SHJ,
            build_side: Some(BuildSide::Left),
            left: on(4, &["a", "b"]),
            right: on(8, &["a", "b"]),
            keys: (&["b", "a"], &["b", "a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "join keys in another order, shuffled hash join building the right",
            strategy: SHJ,
            build_side: Some(BuildSide::Right),
            left: on(8, &["a", "b"]),
            right: on(4, &["a", "b"]),
            keys: (&["b", "a"], &["b", "a"]),
            settings: ENABLED,
            expected: (Some(4), None),
        },
        Case {
            name: "a filter and a projection over the scan",
            strategy: SMJ,
            build_side: None,
            left: Side { buckets: 4, columns: &["a"], wrap: Wrap::FilterAndProject },
            right: Side { buckets: 8, columns: &["a"], wrap: Wrap::FilterAndProject },
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, Some(4)),
        },
        Case {
            name: "a side that is not a scan operation",
            strategy: SMJ,
            build_side: None,
            left: on(4, &["a"]),
            right: Side { buckets: 8, columns: &["a"], wrap: Wrap::Exchange },
            keys: (&["a"], &["a"]),
            settings: ENABLED,
            expected: (None, None),
        },
    ];

    fn coalesced(side: &Plan) -> Option<u32> {
        scans(side).first().expect("a scan").coalesced_to()
    }

    #[test]
    fn buckets_are_coalesced_as_in_spark() {
        for case in CASES {
            let mut runs = vec![(case.left, case.right, case.keys, case.expected, "")];
            if case.strategy != SHJ {
                let keys = (case.keys.1, case.keys.0);
                runs.push((case.right, case.left, keys, (case.expected.1, case.expected.0), " (sides swapped)"));
            }
            for (left, right, keys, expected, swapped) in runs {
                let plan = join_by_name(
                    case.strategy,
                    case.build_side,
                    JoinType::Inner,
                    (left.build("l"), keys.0),
                    (right.build("r"), keys.1),
                );
                let planned = coalesce_buckets_in_join(plan, &conf(case.settings)).unwrap();
                let join = planned.downcast_ref::<SparkJoinExec>().expect("a join");
                assert_eq!((coalesced(join.left()), coalesced(join.right())), expected, "{}{swapped}", case.name);
            }
        }
    }

    #[test]
    fn a_broadcast_hash_join_is_not_coalesced() {
        let (left, right) = (on(4, &["a"]).build("l"), on(8, &["a"]).build("r"));
        let keys = (column(&left, "a"), column(&right, "a"));
        let broadcast: Plan = Arc::new(BroadcastExchangeExec::new(left, vec![Arc::clone(&keys.0)]));
        let plan = join(JoinStrategy::BroadcastHash, Some(BuildSide::Left), broadcast, right, keys);
        let planned = coalesce_buckets_in_join(plan, &conf(ENABLED)).unwrap();
        let join = planned.downcast_ref::<SparkJoinExec>().expect("a join");
        assert_eq!((coalesced(join.left()), coalesced(join.right())), (None, None));
    }
}
