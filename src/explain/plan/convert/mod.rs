//! The conversion of a DataFusion plan into Spark's operators: the converter, which hands out
//! expression ids as values appear, and DataFusion's plumbing, which Spark has no operator
//! for, skipped. The dispatch by operator type is in `dispatch`; the operators themselves are
//! converted in one file per family.

mod adaptive;
mod aggregate;
mod dispatch;
mod exchange;
mod join;
mod limit;
mod project;
mod relation;
mod scan;
mod sort;
mod window;

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_plan::ExecutionPlan;

use super::Node;
use crate::exec::plumbing::plumbing_input;
use crate::explain::expressions::Attr;

/// Where a node sits, for the few operators Spark prints differently by context.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::explain) struct Position {
    /// The root of the query: a limit there is Spark's `CollectLimit`.
    pub root: bool,
    /// Feeds a join directly or through its sort: sort and partitioning keys are the
    /// join keys, which Spark normalizes when they are floating-point.
    pub join_child: bool,
}

/// Converts a DataFusion plan bottom-up, handing out expression ids as values appear.
#[derive(Default)]
pub(in crate::explain) struct Converter {
    next_id: u64,
    next_plan_id: u64,
    /// The input attributes of each partial aggregate, by address, for its final aggregate.
    partial_inputs: HashMap<usize, Vec<Attr>>,
    /// Each table scan converted, by address: the final and the initial plan of an adaptive
    /// query share their scans, which keep their attributes.
    scans: HashMap<usize, Node>,
}

impl Converter {
    fn fresh(&mut self, name: &str, data_type: DataType, nullable: bool) -> Attr {
        self.next_id += 1;
        // DataFusion's grouping-set id is Spark's BIGINT `spark_grouping_id`.
        let (name, data_type) = match name {
            "__grouping_id" => (SPARK_GROUPING_ID, DataType::Int64),
            _ => (name, data_type),
        };
        Attr { name: name.to_string(), id: self.next_id, data_type, nullable }
    }

    fn fresh_field(&mut self, field: &Field) -> Attr {
        self.fresh(field.name(), field.data_type().clone(), field.is_nullable())
    }

    fn fresh_schema(&mut self, schema: &Schema) -> Vec<Attr> {
        schema.fields().iter().map(|f| self.fresh_field(f)).collect()
    }

    fn plan_id(&mut self) -> u64 {
        self.next_plan_id += 1;
        self.next_plan_id
    }
}

/// The name Spark gives the grouping-set id column, which DataFusion calls `__grouping_id`.
const SPARK_GROUPING_ID: &str = "spark_grouping_id";

/// An operator's identity while it is being converted.
pub(in crate::explain) fn address<T: ?Sized>(value: &T) -> usize {
    value as *const T as *const () as usize
}

fn below_plumbing(mut plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    while let Some(inner) = plumbing_input(plan) {
        plan = inner;
    }
    plan
}
