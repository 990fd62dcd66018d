//! DataFusion's `EliminateCrossJoin`, except over inner joins of which one matches NULL with
//! NULL (`a.k IS NOT DISTINCT FROM c.k`): that rule rebuilds a tree of inner joins with the
//! null equality of its top join for all of them, so `a JOIN b ON a.d = b.d JOIN c ON a.k IS
//! NOT DISTINCT FROM c.k` would join `d` NULL-safe too and return rows it must not. The rule
//! runs on the parts of the plan that hold no NULL-safe join; the joins around one keep their
//! keys, and a cross join among them stays one.

use datafusion::common::NullEquality;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::eliminate_cross_join::EliminateCrossJoin;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `EliminateCrossJoin`, kept off NULL-safe joins.
pub type KeepNullSafeJoins = Overridden<EliminateCrossJoin, OffNullSafeJoins>;

#[derive(Debug, Default)]
pub struct OffNullSafeJoins;

impl Rewrite for OffNullSafeJoins {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        if !holds_null_safe_join(&plan) {
            return rule.rewrite(plan, config);
        }
        plan.map_children(|child| self.rewrite(rule, child, config))
    }
}

fn holds_null_safe_join(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        found |= matches!(node, LogicalPlan::Join(join) if join.null_equality == NullEquality::NullEqualsNull);
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}
