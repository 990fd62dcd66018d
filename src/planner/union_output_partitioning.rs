//! Spark 4's `UnionExec.outputPartitioning` (`spark.sql.unionOutputPartitioning`, on by
//! default): a union whose children are all hash-partitioned alike keeps that partitioning,
//! partition `i` of the union being partition `i` of every child, so an aggregate or a join on
//! the key above it needs no Exchange: a bucketed history table unioned with a current table
//! bucketed alike is grouped by the bucket key without a shuffle.
//!
//! Spark compares the children's partitionings as attributes, nullability included, mapped onto
//! the first child's output. When the first child filters a key not null (`isnotnull(k)`, as
//! inferred under a join), its output attribute is no longer the one its partitioning names, and
//! the union concatenates its children instead: we follow that. It runs as DataFusion's
//! `InterleaveExec`. Where we differ: the children's keys must also have the same names, and
//! children that are each one partition (Spark's `SinglePartition`) are concatenated.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_expr::expressions::{Column, IsNotNullExpr};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec, can_interleave};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning, replace_children_if_necessary};

use crate::exec::short_circuit::split_conjunction;

/// `node`, a union, as one that keeps its children's shared hash partitioning, when Spark's
/// would; any other node as it is.
pub fn keep_shared_partitioning(node: Arc<dyn ExecutionPlan>, enabled: bool) -> Result<Arc<dyn ExecutionPlan>> {
    let Some(union) = node.downcast_ref::<UnionExec>() else {
        return Ok(node);
    };
    let children = union.inputs();
    let Partitioning::Hash(keys, _) = children[0].output_partitioning() else {
        return Ok(node);
    };
    let key_names: Vec<&str> = keys.iter().filter_map(|k| k.downcast_ref::<Column>()).map(Column::name).collect();
    if !enabled || !can_interleave(children.iter()) || filters_out_null_keys(&children[0], &key_names) {
        return Ok(node);
    }
    Ok(Arc::new(InterleaveExec::try_new(children.clone())?))
}

/// `plan` over `children`; an `InterleaveExec` whose new children no longer share a
/// partitioning (a bucketed scan below it was disabled) becomes the plain union Spark's would
/// then be.
pub fn with_new_inputs(
    plan: Arc<dyn ExecutionPlan>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if plan.is::<InterleaveExec>() && !can_interleave(children.iter()) {
        return UnionExec::try_new(children);
    }
    replace_children_if_necessary(plan, children)
}

/// Whether a filter between `child` and the operator that partitioned it keeps only rows whose
/// key is not null, which in Spark changes the key's nullability in the child's output.
fn filters_out_null_keys(child: &Arc<dyn ExecutionPlan>, key_names: &[&str]) -> bool {
    let mut node = child;
    loop {
        if let Some(filter) = node.downcast_ref::<FilterExec>() {
            let nulls_out = split_conjunction(filter.predicate()).into_iter().any(|p| {
                p.downcast_ref::<IsNotNullExpr>()
                    .and_then(|n| n.arg().downcast_ref::<Column>())
                    .is_some_and(|c| key_names.contains(&c.name()))
            });
            if nulls_out {
                return true;
            }
        }
        match node.children().as_slice() {
            [input] if input.output_partitioning() == node.output_partitioning() => node = input,
            _ => return false,
        }
    }
}
