//! Spark's `Union.output` derives each column's nullability from its children every time it is
//! asked: a column is nullable when it is nullable in any child. DataFusion fixes a union's
//! schema when the union is built and keeps it while rules rewrite the children below, so a
//! child whose column becomes nullable (`coalesce(j, 64)` simplified to a `CASE` over a common
//! subexpression) leaves the union claiming NOT NULL; physical planning then refuses the
//! aggregate above it (its input schema differs from the logical one). This rule, run last,
//! gives each union the nullability of its children again, and the plan above it schemas
//! derived from that.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, DFSchemaRef};
use datafusion::error::Result;
use datafusion::logical_expr::{LogicalPlan, Union};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct UnionOutputNullability;

impl OptimizerRule for UnionOutputNullability {
    fn name(&self) -> &str {
        "union_output_nullability"
    }

    /// The whole plan at once, bottom up: once a union has changed, every node met after it (those
    /// above it among them) has its schema derived again from its inputs.
    fn apply_order(&self) -> Option<ApplyOrder> {
        None
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let mut changed = false;
        plan.transform_up(|node| match node {
            LogicalPlan::Union(union) => match nullability_of_children(&union)? {
                Some(schema) => {
                    changed = true;
                    Ok(Transformed::yes(LogicalPlan::Union(Union { inputs: union.inputs, schema })))
                }
                None => Ok(Transformed::no(LogicalPlan::Union(union))),
            },
            node if changed => node.recompute_schema().map(Transformed::yes),
            node => Ok(Transformed::no(node)),
        })
    }
}

/// `union`'s schema with each column nullable where a child's is, or `None` when it already is.
fn nullability_of_children(union: &Union) -> Result<Option<DFSchemaRef>> {
    let width = union.schema.fields().len();
    if union.inputs.iter().any(|input| input.schema().fields().len() != width) {
        return Ok(None);
    }
    let nullable: Vec<bool> =
        (0..width).map(|i| union.inputs.iter().any(|input| input.schema().field(i).is_nullable())).collect();
    if union.schema.fields().iter().zip(&nullable).all(|(field, nullable)| field.is_nullable() == *nullable) {
        return Ok(None);
    }
    let fields = union
        .schema
        .iter()
        .zip(nullable)
        .map(|((qualifier, field), nullable)| {
            (qualifier.cloned(), Arc::new(field.as_ref().clone().with_nullable(nullable)))
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, union.schema.metadata().clone())?
        .with_functional_dependencies(union.schema.functional_dependencies().clone())?;
    Ok(Some(Arc::new(schema)))
}
