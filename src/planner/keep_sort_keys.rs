//! DataFusion's `EliminateDuplicatedExpr`, except that a sort keeps every key that is not a
//! repeat of an earlier one. DataFusion also drops the keys it believes the earlier ones
//! determine (functional dependencies), and its dependencies can be wrong past a LEFT JOIN onto
//! an aggregate or a ROLLUP: `ORDER BY c0, d, …` then sorted on `c0` alone, and a LIMIT kept
//! other rows. Spark sorts on every key it is given.

use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{LogicalPlan, Sort, SortExpr};
use datafusion::optimizer::eliminate_duplicated_expr::EliminateDuplicatedExpr;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `EliminateDuplicatedExpr`, keeping sort keys.
pub type KeepSortKeys = Overridden<EliminateDuplicatedExpr, RepeatsOnly>;

#[derive(Debug, Default)]
pub struct RepeatsOnly;

impl Rewrite for RepeatsOnly {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        let LogicalPlan::Sort(sort) = plan else { return rule.rewrite(plan, config) };
        let mut keys = Vec::with_capacity(sort.expr.len());
        for key in &sort.expr {
            // A key sorts nothing after an earlier key on the same expression.
            if !keys.iter().any(|k: &SortExpr| k.expr == key.expr) {
                keys.push(key.clone());
            }
        }
        if keys.len() == sort.expr.len() {
            return Ok(Transformed::no(LogicalPlan::Sort(sort)));
        }
        Ok(Transformed::yes(LogicalPlan::Sort(Sort { expr: keys, ..sort })))
    }
}
