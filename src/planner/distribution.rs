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
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::exec::shuffle_exchange::ShuffleExchangeExec;

/// Whether `plan` holds its rows in one partition as Spark's `SinglePartition` does. A
/// non-bucketed file scan's partitioning is Spark's `UnknownPartitioning(0)` however many
/// splits it reads, and so is that of the operators above it that keep their child's: one
/// split read is still no single partition, and Spark plans an exchange over it.
pub fn is_single_partition(plan: &dyn ExecutionPlan) -> bool {
    plan.output_partitioning().partition_count() == 1 && !reads_file_splits(plan)
}

/// Whether `plan`'s partitions are a non-bucketed scan's splits, as no exchange regroups them.
/// A broadcast join's partitions are its streamed side's, as Spark's `outputPartitioning` of
/// `BroadcastHashJoinExec` is; its broadcast side is never split.
fn reads_file_splits(plan: &dyn ExecutionPlan) -> bool {
    if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
        return !scan.is_bucketed();
    }
    let regroups = plan.is::<ShuffleExchangeExec>()
        || plan.is::<ReusedExchangeExec>()
        || plan.is::<ShuffleQueryStageExec>()
        || plan.is::<AqeShuffleReadExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan.is::<RepartitionExec>()
        || plan.is::<BroadcastExchangeExec>()
        || plan.is::<BroadcastQueryStageExec>();
    !regroups && plan.children().iter().any(|child| reads_file_splits(child.as_ref()))
}

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
pub fn satisfies(plan: &dyn ExecutionPlan, required: &SparkDistribution, require_all: bool) -> bool {
    if is_single_partition(plan) {
        return true;
    }
    let partitioning = plan.output_partitioning();
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
