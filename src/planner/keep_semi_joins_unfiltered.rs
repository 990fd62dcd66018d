//! DataFusion's `FilterNullJoinKeys` (`isnotnull` of each join key under the join), except
//! under semi and anti joins. Spark infers such filters (`InferFiltersFromConstraints`) before
//! `IN`, `EXISTS` and `NOT EXISTS` subqueries become semi and anti joins, so their sides are
//! never filtered for them; the set operations' semi and anti joins match NULL with NULL, which
//! the rule leaves alone anyway.

use datafusion::common::JoinType;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::filter_null_join_keys::FilterNullJoinKeys;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `FilterNullJoinKeys`, kept off semi and anti joins.
pub type KeepSemiJoinsUnfiltered = Overridden<FilterNullJoinKeys, OffSemiAndAntiJoins>;

#[derive(Debug, Default)]
pub struct OffSemiAndAntiJoins;

impl Rewrite for OffSemiAndAntiJoins {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        match &plan {
            LogicalPlan::Join(join) if matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti) => {
                Ok(Transformed::no(plan))
            }
            _ => rule.rewrite(plan, config),
        }
    }
}
