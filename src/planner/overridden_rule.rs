//! A DataFusion optimizer rule whose rewrite we replace, keeping its name and order among the
//! others (`logical_rules` swaps it in by name): `Overridden<R, W>` runs `W`'s rewrite, which
//! may call `R`'s.

use std::fmt::Debug;

use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// What a rewrite returns.
pub type Rewritten = Result<Transformed<LogicalPlan>>;

/// What runs in place of rule `rule`'s rewrite.
pub trait Rewrite: Debug + Send + Sync {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten;
}

#[derive(Debug, Default)]
pub struct Overridden<R, W> {
    rule: R,
    rewrite: W,
}

impl<R: OptimizerRule + Debug + Send + Sync, W: Rewrite> OptimizerRule for Overridden<R, W> {
    fn name(&self) -> &str {
        self.rule.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.rule.apply_order()
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        self.rewrite.rewrite(&self.rule, plan, config)
    }
}
