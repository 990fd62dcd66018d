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
        if children.iter().zip(&required).any(|(child, d)| !satisfies(child.output_partitioning(), d, require_all)) {
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
