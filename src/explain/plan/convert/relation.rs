//! Spark's leaf relations that read no files: `Range` of our `range()` table function,
//! `LocalTableScan` of `VALUES` and empty relations, and the one-row relation.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;

use super::Converter;
use crate::exec::empty_relation::LogicalOutline;
use crate::exec::range::{RangeSplits, range_splits};
use crate::explain::expressions::list;
use crate::explain::plan::{Codegen, Node, Role, field};

impl Converter {
    /// Spark's `Range` of our `range()` table function.
    pub(super) fn range(&mut self, schema: &Schema, arguments: String) -> Node {
        let output = self.fresh_schema(schema);
        let simple = format!("Range {arguments}");
        let details = vec![field("Output", &output), format!("Arguments: {simple}")];
        Node::new("Range", simple, output, Vec::new()).details(details).codegen(Codegen::Yes)
    }

    /// Spark's `LocalTableScan` of an in-memory relation of `rows` rows.
    pub(super) fn local_table(&mut self, schema: &Schema, rows: usize) -> Node {
        let output = self.fresh_schema(schema);
        let arguments = if rows == 0 { format!("<empty>, {}", list(&output)) } else { list(&output) };
        let details = vec![field("Output", &output), format!("Arguments: {arguments}")];
        Node::new("LocalTableScan", format!("LocalTableScan {arguments}"), output, Vec::new())
            .details(details)
            .codegen(Codegen::NotRoot)
    }

    /// Spark's `EmptyRelation` that adaptive execution left where a stage came out empty, over
    /// the logical plan it eliminated.
    pub(super) fn empty_relation(&mut self, schema: &Schema, logical: &LogicalOutline) -> Node {
        let output = self.fresh_schema(schema);
        let arguments = format!("[plan_id={}]", self.plan_id());
        let details = vec![field("Output", &output), format!("Arguments: {arguments}")];
        Node::new("EmptyRelation", format!("EmptyRelation {arguments}"), output, vec![logical_node(logical)])
            .details(details)
    }

    /// Spark's one-row relation of a query without `FROM`.
    pub(super) fn one_row(&mut self, schema: &Schema) -> Node {
        let output = self.fresh_schema(schema);
        let details = vec![field("Output", &output)];
        Node::new("Scan OneRowRelation", "Scan OneRowRelation[]", output, Vec::new())
            .details(details)
            .codegen(Codegen::Yes)
    }
}

/// A logical operator, shown `(unknown)` with no detail block.
fn logical_node(logical: &LogicalOutline) -> Node {
    let children = logical.children.iter().map(logical_node).collect();
    Node::new(logical.name.as_str(), logical.name.as_str(), Vec::new(), children).role(Role::Logical)
}

/// Spark's `Range (start, end, step=s, splits=n)` of our `range()` table function.
pub(super) fn range_arguments(plan: &dyn ExecutionPlan) -> Option<String> {
    let RangeSplits { start, step, rows, splits } = range_splits(plan)?;
    Some(format!("({start}, {}, step={step}, splits={splits})", start + rows as i128 * i128::from(step)))
}

/// The number of rows of an in-memory relation (`VALUES`, empty relations).
pub(super) fn local_rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    if plan.is::<EmptyExec>() {
        return Some(0);
    }
    let memory = plan.downcast_ref::<DataSourceExec>()?.data_source().downcast_ref::<MemorySourceConfig>()?;
    Some(memory.partitions().iter().flatten().map(|b| b.num_rows()).sum())
}
