//! Spark's `EmptyRelationExec`: what adaptive execution leaves where a query stage turned out
//! empty and the operators above it can give no rows either (`AQEPropagateEmptyRelation`). It
//! produces nothing, and keeps the outline of the plan it stands for, which Spark's EXPLAIN
//! prints below it as the logical plan it eliminated (its operators shown `(unknown)`).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, EmptyRecordBatchStream, ExecutionPlan, Partitioning, PlanProperties,
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

#[derive(Debug)]
pub struct EmptyRelationExec {
    logical: LogicalOutline,
    /// It stands for a final aggregate, whose results a projection above may name, as Spark's
    /// aggregate names its own.
    aggregate: bool,
    properties: Arc<PlanProperties>,
}

impl EmptyRelationExec {
    pub fn new(schema: SchemaRef, logical: LogicalOutline) -> Self {
        Self::with_role(schema, logical, false)
    }

    /// An empty relation standing for a final aggregate.
    pub fn of_aggregate(schema: SchemaRef, logical: LogicalOutline) -> Self {
        Self::with_role(schema, logical, true)
    }

    pub fn is_aggregate(&self) -> bool {
        self.aggregate
    }

    fn with_role(schema: SchemaRef, logical: LogicalOutline, aggregate: bool) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        EmptyRelationExec { logical, aggregate, properties: Arc::new(properties) }
    }

    /// The plan it stands for.
    pub fn logical(&self) -> &LogicalOutline {
        &self.logical
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
