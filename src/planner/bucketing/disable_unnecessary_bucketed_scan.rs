//! Spark's `DisableUnnecessaryBucketedScan`: a bucketed scan costs parallelism (one task per
//! bucket) and buys nothing unless an operator above needs its distribution. Walking down
//! from the root, an operator requiring a clustered or all-tuples distribution makes the
//! scans below it "interesting"; an exchange below such an operator makes them
//! uninteresting again unless only sorts, projections, filters and partial aggregates stand
//! between. A scan that is not interesting reads without buckets
//! (`Bucketed: false (disabled by query planner)`); bucket pruning still applies.
//! Runs after `EnsureRequirements`, when `spark.sql.sources.bucketing.autoBucketedScan.enabled`,
//! and again, as in Spark's adaptive execution, each time a run re-plans what is left: a join
//! made a broadcast once its stage's size was known needs its bucketed side no more. Query
//! stages that ran are leaves to it, as in Spark.

use std::sync::Arc;

use crate::exec::sort::SortExec;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;

use crate::config::SparkConf;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::shuffle_exchange::ShuffleExchangeExec;
use crate::planner::distribution::required_distributions;
use crate::planner::union_output_partitioning::with_new_inputs;

pub fn disable_unnecessary_bucketed_scan(
    plan: Arc<dyn ExecutionPlan>,
    conf: &SparkConf,
) -> Result<Arc<dyn ExecutionPlan>> {
    if !conf.bucketing_enabled || !conf.auto_bucketed_scan {
        return Ok(plan);
    }
    walk(plan, false, false, true)
}

/// Operators that keep a bucketed distribution useful below an exchange.
fn is_allowed(plan: &dyn ExecutionPlan) -> bool {
    plan.downcast_ref::<SortExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<AggregateExec>().is_some_and(|a| *a.mode() == AggregateMode::Partial)
}

fn walk(
    plan: Arc<dyn ExecutionPlan>,
    interesting: bool,
    exchange: bool,
    allowed: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        if scan.is_bucketed() && (!interesting || (exchange && allowed)) {
            return Ok(Arc::new(scan.with_status(BucketedStatus::DisabledByQueryPlanner)?));
        }
        return Ok(plan);
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() || plan.is::<ShuffleQueryStageExec>() || plan.is::<BroadcastQueryStageExec>() {
        return Ok(plan);
    }
    let required = required_distributions(plan.as_ref());
    let (interesting, exchange, allowed) = if required.iter().any(|d| d.is_interesting()) {
        (true, false, true)
    } else if plan.downcast_ref::<ShuffleExchangeExec>().is_some() {
        (interesting, true, allowed)
    } else {
        (interesting, exchange, allowed && is_allowed(plan.as_ref()))
    };
    let new_children =
        children.iter().map(|c| walk(Arc::clone(c), interesting, exchange, allowed)).collect::<Result<Vec<_>>>()?;
    if new_children.iter().zip(&children).all(|(a, b)| Arc::ptr_eq(a, b)) {
        return Ok(plan);
    }
    with_new_inputs(plan, new_children)
}

#[cfg(test)]
mod tests {
    use datafusion::common::JoinType;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::PhysicalExpr;
    use datafusion::physical_expr::expressions::{Column, binary, lit};
    use datafusion::physical_plan::union::UnionExec;

    use super::*;
    use crate::exec::broadcast_exchange::BroadcastExchangeExec;
    use crate::exec::join_spec::{BuildSide, JoinStrategy};
    use crate::planner::ensure_requirements::ensure_requirements;
    use crate::planner::test_fixtures::*;

    /// Spark's suite's `t1` and `t2` (8 buckets on `a`), `t3` (4 buckets on `a`).
    fn t(name: &str) -> Plan {
        let buckets = if name == "t3" { 4 } else { 8 };
        scan(table_of(name, ABC, Some((buckets, &["a"])), 1, &[]))
    }

    fn joined(strategy: JoinStrategy, (left, lk): (&str, &str), (right, rk): (&str, &str)) -> Plan {
        let (left, right) = (t(left), t(right));
        let build_side = match strategy {
            JoinStrategy::SortMerge => None,
            _ => Some(BuildSide::Left),
        };
        let left = match strategy {
            JoinStrategy::BroadcastHash => {
                Arc::new(BroadcastExchangeExec::new(Arc::clone(&left), columns(&left, &[lk])))
            }
            _ => left,
        };
        join_by_name(strategy, build_side, JoinType::Inner, (left, &[lk]), (right, &[rk]))
    }

    const SMJ: JoinStrategy = JoinStrategy::SortMerge;
    const SHJ: JoinStrategy = JoinStrategy::ShuffledHash;
    const BHJ: JoinStrategy = JoinStrategy::BroadcastHash;

    fn group_by(input: Plan, keys: &[&str]) -> Plan {
        aggregate(AggregateMode::FinalPartitioned, aggregate(AggregateMode::Partial, input, keys), keys)
    }

    fn count_all(input: Plan) -> Plan {
        aggregate(AggregateMode::Final, aggregate(AggregateMode::Partial, input, &[]), &[])
    }

    struct Case {
        name: &'static str,
        /// The plan as join selection left it, before `EnsureRequirements`.
        plan: fn() -> Plan,
        /// Bucketed scans with `spark.sql.sources.bucketing.autoBucketedScan.enabled` on and off.
        expected: (usize, usize),
    }

    /// Spark's `DisableUnnecessaryBucketedScanSuite`: the number of bucketed scans once
    /// `EnsureRequirements` and the rule have run, with automatic bucketed scans on and off.
    const CASES: &[Case] = &[
        Case { name: "SELECT * FROM t1", plan: || t("t1"), expected: (0, 1) },
        Case {
            name: "SELECT b FROM t1 (the bucket column is not read)",
            plan: || {
                let table = table_of("t1", ABC, Some((8, &["a"])), 1, &[]);
                Scan::new(table).projection(vec![1]).status(BucketedStatus::BucketColumnsNotRead).build()
            },
            expected: (0, 0),
        },
        Case {
            name: "SELECT * FROM t1 WHERE a = 1 (one bucket read)",
            plan: || {
                let scan = Scan::new(table_of("t1", ABC, Some((8, &["a"])), 1, &[])).buckets(&[2]).build();
                let predicate = binary(column(&scan, "a"), Operator::Eq, lit(1i64), &scan.schema()).unwrap();
                Arc::new(FilterExec::try_new(predicate, scan).unwrap())
            },
            expected: (0, 1),
        },
        Case { name: "SELECT * FROM t1 WHERE b IS NOT NULL", plan: || not_null(t("t1"), "b"), expected: (0, 1) },
        Case {
            name: "broadcast hash join of t1 and t2 on a",
            plan: || joined(BHJ, ("t1", "a"), ("t2", "a")),
            expected: (0, 2),
        },
        Case {
            name: "shuffled hash join of t1 and t2 on a",
            plan: || joined(SHJ, ("t1", "a"), ("t2", "a")),
            expected: (2, 2),
        },
        Case {
            name: "sort-merge join of t1 and t2 on a",
            plan: || joined(SMJ, ("t1", "a"), ("t2", "a")),
            expected: (2, 2),
        },
        Case {
            name: "broadcast hash join of t1 and t3 on a",
            plan: || joined(BHJ, ("t1", "a"), ("t3", "a")),
            expected: (0, 2),
        },
        Case {
            name: "shuffled hash join of t1 and t3 on a: t3 is shuffled to 8",
            plan: || joined(SHJ, ("t1", "a"), ("t3", "a")),
            expected: (1, 2),
        },
        Case {
            name: "sort-merge join of t1 and t3 on a: t3 is shuffled to 8",
            plan: || joined(SMJ, ("t1", "a"), ("t3", "a")),
            expected: (1, 2),
        },
        Case {
            name: "sort-merge join of t1.a and t2.b: t2 is shuffled",
            plan: || joined(SMJ, ("t1", "a"), ("t2", "b")),
            expected: (1, 2),
        },
        Case {
            name: "shuffled hash join of t1.a and t2.b: t2 is shuffled",
            plan: || joined(SHJ, ("t1", "a"), ("t2", "b")),
            expected: (1, 2),
        },
        Case {
            name: "sort-merge join of t1.b and t2.b: both shuffled",
            plan: || joined(SMJ, ("t1", "b"), ("t2", "b")),
            expected: (0, 2),
        },
        Case {
            name: "broadcast hash join of t1.b and t2.b",
            plan: || joined(BHJ, ("t1", "b"), ("t2", "b")),
            expected: (0, 2),
        },
        Case {
            name: "sort-merge join of a broadcast hash join of t1 and t2 with t3 on t2.a",
            plan: || {
                let inner = joined(BHJ, ("t1", "a"), ("t2", "a"));
                let t3 = t("t3");
                // t2's `a`, after t1's three columns.
                let t2_a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 3));
                let on = vec![(t2_a, column(&t3, "a"))];
                join_on(SMJ, None, JoinType::Inner, inner, t3, on)
            },
            expected: (2, 3),
        },
        Case { name: "SELECT count(1) FROM t1 GROUP BY a", plan: || group_by(t("t1"), &["a"]), expected: (1, 1) },
        Case { name: "SELECT count(1) FROM t1 GROUP BY b", plan: || group_by(t("t1"), &["b"]), expected: (0, 1) },
        Case { name: "SELECT count(1) FROM t1", plan: || count_all(t("t1")), expected: (0, 1) },
        Case {
            name: "SELECT count(1) FROM a table of one bucket (AllTuples met without an exchange)",
            plan: || count_all(scan(table_of("t1", ABC, Some((1, &["a"])), 1, &[]))),
            expected: (1, 1),
        },
        Case {
            name: "SELECT count(1) FROM (SELECT * FROM t1 DISTRIBUTE BY a, b) GROUP BY b",
            plan: || group_by(exchange(t("t1"), &["a", "b"], 200), &["b"]),
            expected: (0, 1),
        },
        Case {
            name: "SELECT a FROM t1 UNION ALL SELECT a FROM t2 GROUP BY a",
            plan: || {
                let grouped = project(group_by(project(t("t2"), &["a"]), &["a"]), &["a"]);
                UnionExec::try_new(vec![project(t("t1"), &["a"]), grouped]).unwrap()
            },
            expected: (1, 2),
        },
        Case {
            name: "SELECT count(1) FROM (SELECT a FROM t1 UNION ALL SELECT a FROM t2) GROUP BY a",
            plan: || {
                group_by(UnionExec::try_new(vec![project(t("t1"), &["a"]), project(t("t2"), &["a"])]).unwrap(), &["a"])
            },
            expected: (2, 2),
        },
    ];

    fn bucketed_scans(plan: &Plan) -> usize {
        scans(plan).iter().filter(|scan| scan.is_bucketed()).count()
    }

    #[test]
    fn bucketed_scans_are_kept_where_spark_keeps_them() {
        let on = conf(&[]);
        let off = conf(&[("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")]);
        for case in CASES {
            let count = |conf: &SparkConf| {
                let planned = ensure_requirements((case.plan)(), conf).unwrap();
                bucketed_scans(&disable_unnecessary_bucketed_scan(planned, conf).unwrap())
            };
            assert_eq!((count(&on), count(&off)), case.expected, "{}", case.name);
        }
    }

    #[test]
    fn nothing_is_disabled_with_bucketing_off() {
        let conf = conf(&[("spark.sql.sources.bucketing.enabled", "false")]);
        assert_eq!(bucketed_scans(&disable_unnecessary_bucketed_scan(t("t1"), &conf).unwrap()), 1);
    }
}
