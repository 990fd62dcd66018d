//! The walk an analyzer rule that rewrites expressions shares: every expression of every plan
//! node, subqueries included, bottom up, each keeping the name it had so that the columns a
//! query returns keep theirs. The members of a grouping set (`CUBE`, `ROLLUP`, `GROUPING
//! SETS`) are left as they are: they name the aggregate's columns, and a name cannot be kept
//! inside a grouping set.

use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan, Operator};

use super::abandoned_planning;

/// `plan` with `rewrite` applied to each expression, bottom up, against the schema of the
/// node's inputs; each node's schema is then its expressions' own.
pub fn rewrite_expressions(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|plan| {
        let schema = merge_schema(&plan.inputs());
        let rewritten = map_expressions_keeping_names(plan, |expr| {
            expr.transform_down_up(
                |expr| match expr {
                    Expr::GroupingSet(_) => Ok(Transformed::new(expr, false, TreeNodeRecursion::Jump)),
                    expr => Ok(Transformed::no(expr)),
                },
                |expr| {
                    abandoned_planning::check()?;
                    rewrite(expr, &schema)
                },
            )
        })?;
        // A rewritten expression may have another type, and so may the columns above it.
        rewritten.map_data(LogicalPlan::recompute_schema)
    })
    .map(|transformed| transformed.data)
}

/// One plan node with `rewrite` applied to each of its expressions, each keeping its name: the
/// columns a projection or an aggregate outputs are named after its expressions, and the plan
/// above refers to them by those names.
pub fn map_expressions_keeping_names(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr) -> Result<Transformed<Expr>>,
) -> Result<Transformed<LogicalPlan>> {
    let names = NamePreserver::new(&plan);
    plan.map_expressions(|expr| {
        let name = names.save(&expr);
        Ok(rewrite(expr)?.update_data(|expr| name.restore(expr)))
    })
}

/// `=`, `<>`, `<`, `<=`, `>`, `>=`: NULL when either side is.
pub(super) fn is_comparison(op: Operator) -> bool {
    matches!(op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq)
}
