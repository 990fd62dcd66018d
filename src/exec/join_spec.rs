//! What defines a Spark join apart from its inputs: the strategy, the build side, the join
//! type, the keys and condition. Apart from the operator (`join`) because the merge loop
//! (`merge_join`) the operator runs on decides from them whether it applies.

use std::sync::Arc;

use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::utils::JoinFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinStrategy {
    SortMerge,
    ShuffledHash,
    BroadcastHash,
    BroadcastNestedLoop,
    Cartesian,
}

impl JoinStrategy {
    /// Spark's operator name.
    pub fn spark_name(&self) -> &'static str {
        match self {
            JoinStrategy::SortMerge => "SortMergeJoin",
            JoinStrategy::ShuffledHash => "ShuffledHashJoin",
            JoinStrategy::BroadcastHash => "BroadcastHashJoin",
            JoinStrategy::BroadcastNestedLoop => "BroadcastNestedLoopJoin",
            JoinStrategy::Cartesian => "CartesianProduct",
        }
    }

    /// Whether the join needs both inputs hash-partitioned on the keys.
    pub fn is_shuffled(&self) -> bool {
        matches!(self, JoinStrategy::SortMerge | JoinStrategy::ShuffledHash)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildSide {
    Left,
    Right,
}

impl BuildSide {
    pub fn spark_name(&self) -> &'static str {
        match self {
            BuildSide::Left => "BuildLeft",
            BuildSide::Right => "BuildRight",
        }
    }
}

/// Spark's name of a join type (`Inner`, `LeftOuter`, `LeftSemi`, …).
pub fn spark_join_type(join_type: JoinType) -> &'static str {
    match join_type {
        JoinType::Inner => "Inner",
        JoinType::Left => "LeftOuter",
        JoinType::Right => "RightOuter",
        JoinType::Full => "FullOuter",
        JoinType::LeftSemi => "LeftSemi",
        JoinType::LeftAnti => "LeftAnti",
        JoinType::RightSemi => "RightSemi",
        JoinType::RightAnti => "RightAnti",
        JoinType::LeftMark => "ExistenceJoin",
        JoinType::RightMark => "RightExistenceJoin",
    }
}

/// Everything that defines a join apart from its inputs.
#[derive(Debug, Clone)]
pub struct JoinSpec {
    pub strategy: JoinStrategy,
    /// `None` for sort-merge and cartesian joins.
    pub build_side: Option<BuildSide>,
    pub join_type: JoinType,
    /// Equi-join keys as (left expression, right expression).
    pub on: Vec<(Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>)>,
    pub filter: Option<JoinFilter>,
    pub null_equality: NullEquality,
    /// Spark's `isNullAwareAntiJoin`: the anti join of `k NOT IN (subquery)`, on one key, the
    /// subquery broadcast on the right.
    pub null_aware: bool,
    /// Spark's `isSkewJoin`: adaptive execution split a skewed partition of a shuffled join's
    /// input into pieces, each joined with the whole matching partition of the other side.
    pub skew: bool,
    /// Spark's `Cross` join type: a nested loop over a join written `CROSS JOIN`, with no
    /// condition.
    pub cross: bool,
}

impl JoinSpec {
    /// The join type as Spark prints it.
    pub fn spark_join_type(&self) -> &'static str {
        if self.cross { "Cross" } else { spark_join_type(self.join_type) }
    }
}
