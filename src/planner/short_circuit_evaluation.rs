//! Spark's generated code evaluates `a AND b` and `a OR b` lazily: `b` only for the rows `a`
//! leaves undecided, so a condition can guard what follows it (`x <> 0 AND 10 / x > 1`). Our
//! last step before exchanges are reused puts [`ShortCircuit`] in place of DataFusion's `AND`
//! and `OR` in filters and projections, which evaluate their right side over whole batches.
//!
//! Conjuncts that cannot fail are evaluated cheapest first within each run of them: a date
//! range before a string `IN`, so the `IN` sees only the rows in range. Their order changes no
//! answer, and a conjunct that can fail still sees exactly the rows Spark's order gives it.
//! EXPLAIN prints the condition in Spark's order.
//!
//! Join conditions and aggregates get it too, in the arguments and `FILTER` clauses they
//! evaluate over rows: `sum(CASE WHEN q <> 0 AND p / q > 1 THEN 1 END)` divides only where
//! `q <> 0`.
//!
//! Last, because the other rules read conditions as DataFusion builds them (conjuncts,
//! equalities, constant columns), and a filter built over a `ShortCircuit` derives none of
//! them.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::internal_datafusion_err;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::aggregate::AggregatePhysicalExpressions;
use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, LikeExpr};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateInputMode};
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use crate::exec::hash_aggregate::HashAggregateExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::short_circuit::{ShortCircuit, can_fail};

pub fn short_circuit_evaluation(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if let Some(filter) = node.downcast_ref::<FilterExec>() {
            let predicate = lazy(Arc::clone(filter.predicate()), &filter.input().schema())?;
            if !predicate.transformed {
                return Ok(Transformed::no(node));
            }
            let projection = filter.projection().as_ref().map(|p| p.iter().copied().collect());
            let rebuilt = FilterExecBuilder::new(predicate.data, Arc::clone(filter.input()))
                .apply_projection(projection)?
                .with_default_selectivity(filter.default_selectivity())
                .with_batch_size(filter.batch_size())
                .with_fetch(filter.fetch())
                .build()?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
            let mut changed = false;
            let mut exprs = Vec::with_capacity(projection.expr().len());
            let schema = projection.input().schema();
            for ProjectionExpr { expr, alias } in projection.expr() {
                let expr = lazy(Arc::clone(expr), &schema)?;
                changed |= expr.transformed;
                exprs.push(ProjectionExpr { expr: expr.data, alias: alias.clone() });
            }
            if !changed {
                return Ok(Transformed::no(node));
            }
            let rebuilt =
                ProjectionExec::try_new_with_schema_metadata(exprs, Arc::clone(projection.input()), &node.schema())?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        if let Some(join) = node.downcast_ref::<SparkJoinExec>()
            && let Some(filter) = &join.spec().filter
        {
            let condition = lazy(Arc::clone(filter.expression()), filter.schema())?;
            if !condition.transformed {
                return Ok(Transformed::no(node));
            }
            let filter = JoinFilter::new(condition.data, filter.column_indices().to_vec(), Arc::clone(filter.schema()));
            return Ok(Transformed::yes(Arc::new(join.with_filter(filter)?) as Arc<dyn ExecutionPlan>));
        }
        if let Some(aggregate) = node.downcast_ref::<AggregateExec>()
            && let Some(rebuilt) = lazy_aggregate(aggregate)?
        {
            return Ok(Transformed::yes(HashAggregateExec::in_place_of(&node, rebuilt)));
        }
        Ok(Transformed::no(node))
    })
    .map(|transformed| transformed.data)
}

/// `aggregate` with Spark's `AND` and `OR` in the arguments and filters it evaluates over its
/// input rows, if it has any; an aggregate that merges partial results evaluates none.
fn lazy_aggregate(aggregate: &AggregateExec) -> Result<Option<AggregateExec>> {
    if aggregate.mode().input_mode() != AggregateInputMode::Raw {
        return Ok(None);
    }
    let schema = aggregate.input_schema();
    let mut changed = false;
    let mut functions = Vec::with_capacity(aggregate.aggr_expr().len());
    for function in aggregate.aggr_expr() {
        let AggregatePhysicalExpressions { args, order_by_exprs } = function.all_expressions();
        let args = args.into_iter().map(|arg| lazy(arg, &schema)).collect::<Result<Vec<_>>>()?;
        if !args.iter().any(|arg| arg.transformed) {
            functions.push(Arc::clone(function));
            continue;
        }
        changed = true;
        let args = args.into_iter().map(|arg| arg.data).collect();
        let rebuilt = function
            .with_new_expressions(args, order_by_exprs)
            .ok_or_else(|| internal_datafusion_err!("{} takes no new arguments", function.name()))?;
        functions.push(Arc::new(rebuilt));
    }
    let mut filters = Vec::with_capacity(aggregate.filter_expr().len());
    for filter in aggregate.filter_expr() {
        let filter = filter.as_ref().map(|filter| lazy(Arc::clone(filter), &schema)).transpose()?;
        changed |= filter.as_ref().is_some_and(|filter| filter.transformed);
        filters.push(filter.map(|filter| filter.data));
    }
    if !changed {
        return Ok(None);
    }
    let rebuilt = AggregateExec::try_new(
        *aggregate.mode(),
        aggregate.group_expr().clone(),
        functions,
        filters,
        Arc::clone(aggregate.input()),
        schema,
    )?;
    Ok(Some(rebuilt.with_limit_options(aggregate.limit_options())))
}

/// `expr` with each `AND` and `OR` evaluated as Spark does. `schema`: its input's.
fn lazy(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_down(|e| {
        let Some(binary) = e.downcast_ref::<BinaryExpr>() else { return Ok(Transformed::no(e)) };
        let rewritten = match binary.op() {
            Operator::And => conjunction(&e, schema)?,
            Operator::Or => {
                ShortCircuit::new(Operator::Or, lazy_side(binary.left(), schema)?, lazy_side(binary.right(), schema)?)
            }
            _ => None,
        };
        match rewritten {
            // Its operands were rewritten by the call that made it.
            Some(rewritten) => Ok(Transformed::new(Arc::new(rewritten), true, TreeNodeRecursion::Jump)),
            None => Ok(Transformed::no(e)),
        }
    })
}

/// `side` with each `AND` and `OR` evaluated as Spark does, conjuncts that cannot fail cheapest
/// first. `schema`: its input's.
pub fn lazy_side(side: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(lazy(Arc::clone(side), schema)?.data)
}

/// The `AND`s of `expr` as one left-deep chain of [`ShortCircuit`]s over its conjuncts, those
/// that cannot fail put cheapest first within each run of them.
fn conjunction(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<Option<ShortCircuit>> {
    let conjuncts: Vec<Arc<dyn PhysicalExpr>> =
        split_conjunction(expr).into_iter().map(|c| lazy_side(c, schema)).collect::<Result<_>>()?;
    let mut order = conjuncts.clone();
    for run in order.chunk_by_mut(|a, b| !can_fail(a) && !can_fail(b)) {
        run.sort_by_key(|conjunct| costly(conjunct, schema));
    }
    let reordered = order.iter().zip(&conjuncts).any(|(a, b)| !Arc::ptr_eq(a, b));
    let mut operands = order.into_iter();
    let (Some(first), Some(second)) = (operands.next(), operands.next()) else { return Ok(None) };
    let chain = operands.fold(ShortCircuit::and(first, second), |chain, next| ShortCircuit::and(Arc::new(chain), next));
    Ok(Some(if reordered { chain.shown_as(Arc::clone(expr)) } else { chain }))
}

/// Whether a conjunct that cannot fail is worth putting after the others: it matches strings
/// or lists.
fn costly(conjunct: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    conjunct
        .exists(|e| {
            let compares_strings = e
                .downcast_ref::<BinaryExpr>()
                .is_some_and(|binary| binary.left().data_type(schema).is_ok_and(|t| t.is_string() || t.is_binary()));
            Ok(compares_strings || e.is::<InListExpr>() || e.is::<LikeExpr>())
        })
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::common::ScalarValue;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};
    use datafusion::physical_plan::empty::EmptyExec;

    use super::*;

    /// The operands of a left-deep chain of `AND`s, in the order they are evaluated.
    fn evaluation_order(expr: &Arc<dyn PhysicalExpr>) -> Vec<String> {
        match expr.downcast_ref::<ShortCircuit>() {
            Some(and) if *and.op() == Operator::And => {
                let mut order = evaluation_order(and.left());
                order.push(and.right().to_string());
                order
            }
            _ => vec![expr.to_string()],
        }
    }

    #[test]
    fn conjuncts_that_cannot_fail_go_cheapest_first_within_their_run() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Int32, true),
            Field::new("x", DataType::Int64, true),
        ]));
        let column = |name| col(name, &schema).unwrap();
        let compare = |left, op, right| binary(left, op, right, &schema).unwrap();
        let listed = in_list(column("s"), vec![lit("a"), lit("b")], &false, &schema).unwrap();
        let above_five = compare(column("d"), Operator::Gt, lit(5i32));
        let quotient = compare(lit(10i64), Operator::Divide, column("x"));
        let divides = compare(quotient, Operator::Gt, lit(1i64));
        let below_nine = compare(column("d"), Operator::Lt, lit(9i32));
        let is_c = compare(column("s"), Operator::Eq, lit(ScalarValue::Utf8(Some("c".into()))));
        let written = [&listed, &above_five, &divides, &is_c, &below_nine];
        let predicate = written
            .iter()
            .skip(1)
            .fold(Arc::clone(written[0]), |all, next| compare(all, Operator::And, Arc::clone(next)));
        let filter =
            FilterExec::try_new(Arc::clone(&predicate), Arc::new(EmptyExec::new(Arc::clone(&schema)))).unwrap();

        let planned = short_circuit_evaluation(Arc::new(filter)).unwrap();
        let lazy = planned.downcast_ref::<FilterExec>().unwrap().predicate();
        // The division can fail: the conjuncts before it stay before it, those after stay after.
        let expected = [&above_five, &listed, &divides, &below_nine, &is_c].map(|c| c.to_string());
        assert_eq!(evaluation_order(lazy), expected);
        assert_eq!(lazy.to_string(), predicate.to_string(), "printed in the order written");
    }
}
