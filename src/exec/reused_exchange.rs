//! Spark's `ReusedExchangeExec`: a second place in the plan that reads an exchange computed
//! elsewhere in it, instead of computing the same rows and moving them again. A leaf, as in
//! Spark; the exchange it reads counts it as one more reader of each partition.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::shuffle_exchange::{ShuffleExchangeExec, ShuffleReadSpec};

#[derive(Debug)]
pub struct ReusedExchangeExec {
    exchange: Arc<ShuffleExchangeExec>,
}

impl ReusedExchangeExec {
    /// Reads `exchange`, which has not run yet, as one more reader.
    pub fn try_new(exchange: Arc<ShuffleExchangeExec>) -> Result<Self> {
        exchange.add_reader()?;
        Ok(ReusedExchangeExec { exchange })
    }

    pub fn exchange(&self) -> &Arc<ShuffleExchangeExec> {
        &self.exchange
    }
}

impl DisplayAs for ReusedExchangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ReusedExchangeExec")
    }
}

impl ExecutionPlan for ReusedExchangeExec {
    fn name(&self) -> &str {
        "ReusedExchangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.exchange.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        self.exchange.read(ShuffleReadSpec::Partitions(partition..partition + 1), context)
    }
}
