//! Spark's `BroadcastExchangeExec`: the build side of a broadcast join, collected once into a
//! single partition that every probe partition shares (DataFusion's `HashJoinExec` in
//! `CollectLeft` mode builds its hash table from it once and hands it to all probe tasks).

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

#[derive(Debug)]
pub struct BroadcastExchangeExec {
    /// The build keys, as Spark's `HashedRelationBroadcastMode` prints them.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Built for a null-aware anti join, which Spark's broadcast mode records.
    null_aware: bool,
    gather: Arc<CoalescePartitionsExec>,
}

impl BroadcastExchangeExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        BroadcastExchangeExec { keys, null_aware: false, gather: Arc::new(CoalescePartitionsExec::new(input)) }
    }

    pub fn null_aware(self, null_aware: bool) -> Self {
        BroadcastExchangeExec { null_aware, ..self }
    }

    pub fn is_null_aware(&self) -> bool {
        self.null_aware
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        self.gather.input()
    }

    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }
}

impl DisplayAs for BroadcastExchangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "BroadcastExchangeExec: keys=[{}]", keys.join(", "))
    }
}

impl ExecutionPlan for BroadcastExchangeExec {
    fn name(&self) -> &str {
        "BroadcastExchangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.gather.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.gather.input()]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for key in &self.keys {
            if f(key)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(BroadcastExchangeExec::new(children.swap_remove(0), self.keys.clone()).null_aware(self.null_aware)))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        self.gather.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.gather.metrics()
    }
}
