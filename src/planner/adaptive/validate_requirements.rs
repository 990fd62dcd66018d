//! Spark's `ValidateRequirements`: whether every operator still gets the distribution it needs
//! — each child satisfies its required distribution, and the children of a join are
//! partitioned alike. Adaptive rewrites (local reads, skew splits, join changes) are kept only
//! when the plan stays valid, since an invalid one would need new exchanges.

use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use super::is_query_stage;
use crate::config::SparkConf;
use crate::planner::distribution::{SparkDistribution, required_distributions, satisfies};

pub fn is_valid(plan: &Arc<dyn ExecutionPlan>, conf: &SparkConf) -> bool {
    if is_query_stage(plan) {
        return true;
    }
    let children = plan.children();
    let required = required_distributions(plan.as_ref());
    if required.len() == children.len() {
        let require_all = conf.require_all_cluster_keys_for_distribution;
        if children.iter().zip(&required).any(|(child, d)| !satisfies(child.as_ref(), d, require_all)) {
            return false;
        }
        let mut clustered = children
            .iter()
            .zip(&required)
            .filter(|(_, d)| matches!(d, SparkDistribution::Clustered(_)))
            .map(|(child, _)| child.output_partitioning().partition_count());
        if let Some(first) = clustered.next()
            && clustered.any(|count| count != first)
        {
            return false;
        }
    }
    children.iter().all(|child| is_valid(child, conf))
}

#[cfg(test)]
mod tests {
    use datafusion::common::{JoinType, NullEquality};
    use datafusion::physical_plan::aggregates::AggregateMode;

    use super::*;
    use crate::exec::broadcast_exchange::BroadcastExchangeExec;
    use crate::exec::join::SparkJoinExec;
    use crate::exec::join_spec::{BuildSide, JoinSpec, JoinStrategy};
    use crate::planner::test_fixtures::*;

    fn bucketed(name: &str, buckets: u32, column: &'static str) -> Plan {
        scan(table_of(name, ABC, Some((buckets, &[column])), 1, &[]))
    }

    fn sort_merge_on_a(left: Plan, right: Plan, skew: bool) -> Plan {
        let (left_key, right_key) = (column(&left, "a"), column(&right, "a"));
        let (left, right) = (local_sort(left, Arc::clone(&left_key)), local_sort(right, Arc::clone(&right_key)));
        let spec = JoinSpec {
            strategy: JoinStrategy::SortMerge,
            build_side: None,
            join_type: JoinType::Inner,
            on: vec![(left_key, right_key)],
            filter: None,
            null_equality: NullEquality::NullEqualsNothing,
            null_aware: false,
            skew,
            cross: false,
        };
        Arc::new(SparkJoinExec::try_new(spec, left, right).unwrap())
    }

    struct Case {
        name: &'static str,
        plan: fn() -> Plan,
        settings: &'static [(&'static str, &'static str)],
        valid: bool,
    }

    /// Spark's `ValidateRequirements`: every child satisfies its required distribution, and the
    /// children of an operator clustering several are partitioned alike.
    const CASES: &[Case] = &[
        Case {
            name: "a sort-merge join of sides bucketed alike",
            plan: || sort_merge_on_a(bucketed("l", 8, "a"), bucketed("r", 8, "a"), false),
            settings: &[],
            valid: true,
        },
        Case {
            name: "a sort-merge join of 8 and 4 buckets",
            plan: || sort_merge_on_a(bucketed("l", 8, "a"), bucketed("r", 4, "a"), false),
            settings: &[],
            valid: false,
        },
        Case {
            name: "a sort-merge join of a side bucketed on another column",
            plan: || sort_merge_on_a(bucketed("l", 8, "a"), bucketed("r", 8, "b"), false),
            settings: &[],
            valid: false,
        },
        Case {
            name: "a skew join requires nothing of its sides",
            plan: || sort_merge_on_a(bucketed("l", 8, "a"), bucketed("r", 4, "b"), true),
            settings: &[],
            valid: true,
        },
        Case {
            name: "an aggregate on the bucket column",
            plan: || aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["a"]),
            settings: &[],
            valid: true,
        },
        Case {
            name: "an aggregate on another column",
            plan: || aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["b"]),
            settings: &[],
            valid: false,
        },
        Case {
            name: "an aggregate on a superset of the bucket columns",
            plan: || aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["a", "b"]),
            settings: &[],
            valid: true,
        },
        Case {
            name: "an aggregate on a superset of the bucket columns, all required",
            plan: || aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["a", "b"]),
            settings: &[("spark.sql.requireAllClusterKeysForDistribution", "true")],
            valid: false,
        },
        Case {
            name: "a global aggregate over 8 partitions",
            plan: || aggregate(AggregateMode::Final, bucketed("t", 8, "a"), &[]),
            settings: &[],
            valid: false,
        },
        Case {
            name: "a global aggregate over one partition",
            plan: || aggregate(AggregateMode::Final, bucketed("t", 1, "a"), &[]),
            settings: &[],
            valid: true,
        },
        Case {
            name: "an invalid operator below another",
            plan: || project(aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["b"]), &["b"]),
            settings: &[],
            valid: false,
        },
        Case {
            name: "a broadcast hash join requires nothing of its stream side",
            plan: || {
                let (stream, build) = (bucketed("l", 8, "b"), bucketed("r", 4, "b"));
                let broadcast: Plan = Arc::new(BroadcastExchangeExec::new(Arc::clone(&build), columns(&build, &["a"])));
                let on = vec![(column(&stream, "a"), column(&build, "a"))];
                join_on(JoinStrategy::BroadcastHash, Some(BuildSide::Right), JoinType::Inner, stream, broadcast, on)
            },
            settings: &[],
            valid: true,
        },
        Case {
            name: "what ran in a finished stage is not judged again",
            plan: || {
                let invalid = aggregate(AggregateMode::FinalPartitioned, bucketed("t", 8, "a"), &["b"]);
                stage(0, exchange(invalid, &["b"], 4), vec![vec![1; 4]])
            },
            settings: &[],
            valid: true,
        },
    ];

    #[test]
    fn plans_are_valid_where_spark_finds_them_valid() {
        for case in CASES {
            assert_eq!(is_valid(&(case.plan)(), &conf(case.settings)), case.valid, "{}", case.name);
        }
    }
}
