//! Spark's `Distribution` (what an operator needs of its input) and the test of whether a
//! partitioning satisfies it (`cat/plans/physical/partitioning.scala`).
//!
//! Every `Partitioning::Hash` in our plans comes from a bucketed scan or our own exchange,
//! so it always means Spark's Murmur3 `hashpartitioning`.

use std::sync::Arc;

use datafusion::physical_expr::{
    Distribution as DfDistribution, PhysicalExpr, physical_exprs_contains, physical_exprs_equal,
};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use crate::exec::join::SparkJoinExec;

#[derive(Debug, Clone)]
pub enum SparkDistribution {
    Unspecified,
    /// Rows with equal keys in the same partition (`ClusteredDistribution`).
    Clustered(Vec<Arc<dyn PhysicalExpr>>),
    /// Everything in one partition (`AllTuples`).
    AllTuples,
}

impl SparkDistribution {
    /// Whether this requirement makes a bucketed input worth keeping
    /// (`DisableUnnecessaryBucketedScan.hasInterestingPartition`).
    pub fn is_interesting(&self) -> bool {
        matches!(self, SparkDistribution::Clustered(_) | SparkDistribution::AllTuples)
    }
}

/// What `plan` requires of each child, in Spark's terms.
pub fn required_distributions(plan: &dyn ExecutionPlan) -> Vec<SparkDistribution> {
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        // A skew join reads partitions in pieces and twice: no longer a clustered input.
        return if join.spec().strategy.is_shuffled() && !join.spec().skew {
            vec![SparkDistribution::Clustered(join.left_keys()), SparkDistribution::Clustered(join.right_keys())]
        } else {
            vec![SparkDistribution::Unspecified; 2]
        };
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        let keys: Vec<Arc<dyn PhysicalExpr>> = aggregate.group_expr().input_exprs();
        return vec![match aggregate.mode() {
            AggregateMode::Partial => SparkDistribution::Unspecified,
            _ if keys.is_empty() => SparkDistribution::AllTuples,
            _ => SparkDistribution::Clustered(keys),
        }];
    }
    #[allow(deprecated)]
    plan.required_input_distribution()
        .into_iter()
        .map(|d| match d {
            DfDistribution::UnspecifiedDistribution => SparkDistribution::Unspecified,
            DfDistribution::SinglePartition => SparkDistribution::AllTuples,
            DfDistribution::KeyPartitioned(keys) | DfDistribution::HashPartitioned(keys) => {
                SparkDistribution::Clustered(keys)
            }
        })
        .collect()
}

/// `Partitioning.satisfies(ClusteredDistribution)`: a single partition always does; a hash
/// partitioning does when its keys are among the clustering keys (all of them, in order,
/// when `require_all` — Spark's `requireAllClusterKeysForDistribution`).
pub fn satisfies(partitioning: &Partitioning, required: &SparkDistribution, require_all: bool) -> bool {
    if partitioning.partition_count() == 1 {
        return true;
    }
    match (required, partitioning) {
        (SparkDistribution::Unspecified, _) => true,
        (SparkDistribution::Clustered(keys), Partitioning::Hash(exprs, _)) => {
            if require_all {
                physical_exprs_equal(exprs, keys)
            } else {
                !exprs.is_empty() && exprs.iter().all(|e| physical_exprs_contains(keys, e))
            }
        }
        _ => false,
    }
}
