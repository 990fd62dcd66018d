//! Spark's `ReusedExchangeExec`: a second place in the plan that reads an exchange computed
//! elsewhere in it, instead of computing the same rows and moving them again. A leaf, as in
//! Spark; the exchange it reads counts it as one more reader of each partition. A shuffle or
//! a broadcast exchange, as in Spark.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::broadcast_exchange::BroadcastExchangeExec;
use super::downcast_plan::downcast_plan;
use super::shuffle_exchange::{ShuffleExchangeExec, ShuffleReadSpec};

/// The exchange a `ReusedExchange` reads.
#[derive(Debug, Clone)]
pub enum Reused {
    Shuffle(Arc<ShuffleExchangeExec>),
    Broadcast(Arc<BroadcastExchangeExec>),
}

impl Reused {
    /// `plan` as an exchange that can be reused, if it is one.
    pub fn of(plan: &Arc<dyn ExecutionPlan>) -> Option<Reused> {
        downcast_plan::<ShuffleExchangeExec>(plan)
            .map(Reused::Shuffle)
            .or_else(|| downcast_plan::<BroadcastExchangeExec>(plan).map(Reused::Broadcast))
    }
}

#[derive(Debug)]
pub struct ReusedExchangeExec {
    reused: Reused,
}

impl ReusedExchangeExec {
    /// Reads `reused`, which has not run yet, as one more reader.
    pub fn try_new(reused: Reused) -> Result<Self> {
        match &reused {
            Reused::Shuffle(exchange) => exchange.add_reader()?,
            Reused::Broadcast(exchange) => exchange.add_reader(),
        }
        Ok(ReusedExchangeExec { reused })
    }

    /// The shuffle exchange read, if a shuffle is.
    pub fn shuffle(&self) -> Option<&Arc<ShuffleExchangeExec>> {
        match &self.reused {
            Reused::Shuffle(exchange) => Some(exchange),
            Reused::Broadcast(_) => None,
        }
    }

    /// Whether `plan` gathers a broadcast: a `BroadcastExchange` or a `ReusedExchange` of one.
    pub fn gathers_broadcast(plan: &dyn ExecutionPlan) -> bool {
        plan.downcast_ref::<BroadcastExchangeExec>().is_some()
            || plan.downcast_ref::<ReusedExchangeExec>().is_some_and(|r| matches!(r.reused, Reused::Broadcast(_)))
    }

    /// The exchange read, as the plan node it is.
    pub fn exchange(&self) -> &dyn ExecutionPlan {
        match &self.reused {
            Reused::Shuffle(exchange) => exchange.as_ref(),
            Reused::Broadcast(exchange) => exchange.as_ref(),
        }
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
        self.exchange().properties()
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
        match &self.reused {
            Reused::Shuffle(exchange) => exchange.read(ShuffleReadSpec::Partitions(partition..partition + 1), context),
            Reused::Broadcast(exchange) => exchange.execute(partition, context),
        }
    }
}
