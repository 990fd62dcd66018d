//! Spark's `EmptyRelationExec`: what adaptive execution leaves where a query stage turned out
//! empty and the operators above it can give no rows either (`AQEPropagateEmptyRelation`). It
//! produces nothing, and keeps the outline of the plan it stands for, which Spark's EXPLAIN
//! prints below it as the logical plan it eliminated (its operators shown `(unknown)`).

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, EmptyRecordBatchStream, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};

/// A logical operator of the plan an empty relation replaced, by Spark's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalOutline {
    pub name: String,
    pub children: Vec<LogicalOutline>,
}

impl LogicalOutline {
    pub fn new(name: &str, children: Vec<LogicalOutline>) -> Self {
        LogicalOutline { name: name.to_string(), children }
    }
}

/// Where we differ: it keeps the partitioning and order of the plan it replaced (which no rows
/// satisfy trivially), so what reads it needs no new exchange or sort; Spark re-plans instead.
#[derive(Debug)]
pub struct EmptyRelationExec {
    logical: LogicalOutline,
    /// It stands for a final aggregate, whose results a projection above may name, as Spark's
    /// aggregate names its own.
    aggregate: bool,
    /// The query stages that ran below what it replaced, for the figures of the run.
    ran: Vec<Arc<dyn ExecutionPlan>>,
    properties: Arc<PlanProperties>,
}

impl EmptyRelationExec {
    /// No rows in place of `replaced`, which the stages `ran` fed.
    pub fn new(replaced: &Arc<dyn ExecutionPlan>, logical: LogicalOutline, ran: Vec<Arc<dyn ExecutionPlan>>) -> Self {
        let properties = PlanProperties::new(
            replaced.equivalence_properties().clone(),
            replaced.output_partitioning().clone(),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        EmptyRelationExec { logical, aggregate: false, ran, properties: Arc::new(properties) }
    }

    /// An empty relation standing for a final aggregate.
    pub fn of_aggregate(self) -> Self {
        EmptyRelationExec { aggregate: true, ..self }
    }

    pub fn is_aggregate(&self) -> bool {
        self.aggregate
    }

    /// The plan it stands for.
    pub fn logical(&self) -> &LogicalOutline {
        &self.logical
    }

    /// The query stages that ran below what it replaced.
    pub fn ran(&self) -> &[Arc<dyn ExecutionPlan>] {
        &self.ran
    }
}

impl DisplayAs for EmptyRelationExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "EmptyRelationExec: {}", self.logical.name)
    }
}

impl ExecutionPlan for EmptyRelationExec {
    fn name(&self) -> &str {
        "EmptyRelationExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
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

    fn execute(&self, _partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        Ok(Box::pin(EmptyRecordBatchStream::new(self.schema())))
    }
}
