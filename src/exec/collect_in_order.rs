//! The rows of a range-partitioned global sort, partition after partition, as Spark's
//! `executeCollect` returns a sorted plan's partitions in order. Spark's plan has no operator
//! for it (EXPLAIN shows none); here it makes the sort's partitions one stream for the client.
//!
//! The partitions run side by side, as many at once as the session has target partitions
//! (each sort holds its rows until it emits them), each a few batches ahead of the reader.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::common::spawn_buffered;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

/// Batches each running partition may hold ready ahead of the reader.
const PREFETCH_BATCHES: usize = 2;

#[derive(Debug)]
pub struct CollectInOrderExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl CollectInOrderExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        // Partitions in order keep a global sort's ordering.
        let mut equivalences = EquivalenceProperties::new(input.schema());
        if let Some(ordering) = input.output_ordering() {
            equivalences.add_ordering(ordering.clone());
        }
        let properties = PlanProperties::new(
            equivalences,
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        CollectInOrderExec { input, properties: Arc::new(properties) }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for CollectInOrderExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CollectInOrderExec")
    }
}

impl ExecutionPlan for CollectInOrderExec {
    fn name(&self) -> &str {
        "CollectInOrderExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(CollectInOrderExec::new(children.swap_remove(0))))
    }

    fn execute(&self, _partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let (input, schema) = (Arc::clone(&self.input), self.schema());
        let running = context.session_config().target_partitions().max(1);
        let partitions = input.output_partitioning().partition_count();
        let stream = futures::stream::iter(0..partitions)
            .map(move |partition| {
                let stream =
                    input.execute(partition, Arc::clone(&context)).map(|s| spawn_buffered(s, PREFETCH_BATCHES));
                async move { stream }
            })
            .buffered(running)
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
