//! Joins coalesced shuffle partitions one by one where nothing needs the join's order: a
//! sort-merge join whose sides read the same coalesced partitions sorts and joins each
//! shuffle partition of them on its own (`exec::apart::joining_shuffle_partitions_apart`).
//!
//! A sort-merge join directly above another, on the same key, relies on the order of the one
//! below; where all their reads coalesce the same partitions, the join above takes the one below
//! apart with it, shuffle partition by shuffle partition (TPC-H's Q21: an anti join over a semi
//! join of lineitem).
//!
//! Spark has no such rule: its plan, which EXPLAIN shows unchanged, sorts each coalesced
//! partition whole. The rows are the same; only their order within a partition is not, so
//! the rule leaves alone a join whose order an operator above relies on (one that requires
//! an input order, through operators that keep their input's order). An aggregate that only
//! makes use of an order its input happened to have is rebuilt to hash its groups instead.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::{ExecutionPlan, InputOrderMode, replace_children_if_necessary};

use super::is_query_stage;
use crate::exec::apart::joining_shuffle_partitions_apart;
use crate::exec::join::SparkJoinExec;
use crate::planner::ensure_requirements::required_ordering;

/// `plan`, a stage about to run; `order_needed`: whether its consumer relies on its order.
pub fn join_shuffle_partitions_apart(
    plan: Arc<dyn ExecutionPlan>,
    order_needed: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if is_query_stage(&plan) {
        return Ok(plan);
    }
    let maintained = plan.maintains_input_order();
    let children = plan
        .children()
        .into_iter()
        .enumerate()
        .map(|(i, child)| {
            let needed = required_ordering(plan.as_ref(), i).is_some() && !only_exploits_order(plan.as_ref())
                || order_needed && maintained.get(i).copied().unwrap_or(false);
            join_shuffle_partitions_apart(Arc::clone(child), needed)
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = replace_children_if_necessary(plan, children)?;
    if order_needed {
        return Ok(plan);
    }
    match plan.downcast_ref::<SparkJoinExec>().and_then(joining_shuffle_partitions_apart) {
        Some(apart) => Ok(Arc::new(apart)),
        None => Ok(plan),
    }
}

/// Whether `plan` asks for its input's order only because the input had it when planned: an
/// aggregate that finds its groups as runs where the rows came in order, and by hashing once
/// rebuilt over an input with none. Spark's `HashAggregate` needs no order at all.
fn only_exploits_order(plan: &dyn ExecutionPlan) -> bool {
    plan.downcast_ref::<AggregateExec>().is_some_and(|aggregate| {
        *aggregate.input_order_mode() != InputOrderMode::Linear
            && aggregate.aggr_expr().iter().all(|function| function.order_bys().is_empty())
    })
}

#[cfg(test)]
mod tests {
    use datafusion::common::JoinType;
    use datafusion::physical_plan::ExecutionPlanProperties;

    use super::*;
    use crate::exec::aqe_shuffle_read::{AqeShuffleReadExec, ShufflePartitionSpec};
    use crate::exec::join_spec::JoinStrategy;
    use crate::planner::adaptive::matching;
    use crate::planner::test_fixtures::*;
    use ShufflePartitionSpec::Coalesced;

    /// A stage of four shuffle partitions on `a`, read by `specs`, sorted on `a`.
    fn sorted_read(id: usize, specs: &[ShufflePartitionSpec]) -> Plan {
        let stage = hash_stage(id, &format!("t{id}"), &["a"], vec![vec![10; 4]]);
        let read: Plan = Arc::new(AqeShuffleReadExec::try_new(stage, specs.to_vec()).unwrap());
        let key = column(&read, "a");
        local_sort(read, key)
    }

    const TWO: &[ShufflePartitionSpec] = &[Coalesced(0..2), Coalesced(2..4)];
    const FOUR: &[ShufflePartitionSpec] = &[Coalesced(0..1), Coalesced(1..2), Coalesced(2..3), Coalesced(3..4)];

    fn sort_merge(join_type: JoinType, left: Plan, right: Plan) -> Plan {
        let on = vec![(column(&left, "a"), column(&right, "a"))];
        join_on(JoinStrategy::SortMerge, None, join_type, left, right, on)
    }

    fn coalesced_join() -> Plan {
        sort_merge(JoinType::Inner, sorted_read(0, TWO), sorted_read(1, TWO))
    }

    /// An inner join over coalesced reads, joined with another read (`outer_specs`) on its key.
    fn chained_join(outer_specs: &'static [ShufflePartitionSpec]) -> Plan {
        let inner = coalesced_join();
        let outer_right = sorted_read(2, outer_specs);
        let on = vec![(column(&inner, "a"), column(&outer_right, "a"))];
        join_on(JoinStrategy::SortMerge, None, JoinType::Inner, inner, outer_right, on)
    }

    struct Case {
        name: &'static str,
        plan: fn() -> Plan,
        /// Whether the stage's consumer relies on its order.
        order_needed: bool,
        /// For each join, innermost first: whether it joins its shuffle partitions apart.
        expected: &'static [bool],
    }

    /// Ours, not Spark's: a sort-merge join whose sides read the same coalesced partitions joins
    /// their shuffle partitions one by one, unless something above relies on its order.
    const CASES: &[Case] = &[
        Case {
            name: "an inner join on one bigint key over coalesced reads",
            plan: coalesced_join,
            order_needed: false,
            expected: &[true],
        },
        Case {
            name: "the stage's consumer needs the order",
            plan: coalesced_join,
            order_needed: true,
            expected: &[false],
        },
        Case {
            name: "a projection passes the order its consumer needs down",
            plan: || project(coalesced_join(), &["a"]),
            order_needed: true,
            expected: &[false],
        },
        Case {
            name: "a projection whose consumer needs no order",
            plan: || project(coalesced_join(), &["a"]),
            order_needed: false,
            expected: &[true],
        },
        Case {
            name: "a sort-merge join above relies on the order of the one below: it takes both apart",
            plan: || chained_join(TWO),
            order_needed: false,
            expected: &[true, true],
        },
        Case {
            name: "a join above whose other side reads other partitions leaves the one below whole",
            plan: || chained_join(FOUR),
            order_needed: false,
            expected: &[false, false],
        },
        Case {
            name: "a chain of joins whose consumer needs the order",
            plan: || chained_join(TWO),
            order_needed: true,
            expected: &[false, false],
        },
        Case {
            name: "reads of single shuffle partitions: nothing coalesced to take apart",
            plan: || sort_merge(JoinType::Inner, sorted_read(0, FOUR), sorted_read(1, FOUR)),
            order_needed: false,
            expected: &[false],
        },
        Case {
            name: "a left outer join runs as DataFusion's sort-merge join",
            plan: || sort_merge(JoinType::Left, sorted_read(0, TWO), sorted_read(1, TWO)),
            order_needed: false,
            expected: &[false],
        },
    ];

    #[test]
    fn coalesced_partitions_are_joined_apart_where_no_order_is_needed() {
        for case in CASES {
            let planned = join_shuffle_partitions_apart((case.plan)(), case.order_needed).unwrap();
            let joins = matching(&planned, &|node| node.is::<SparkJoinExec>());
            // A join taken apart declares no order; one that is not keeps its keys' order.
            let apart: Vec<bool> = joins.iter().map(|join| join.output_ordering().is_none()).collect();
            assert_eq!(apart, case.expected, "{}", case.name);
        }
    }
}
