//! Spark's `PullOutGroupingExpressions`: an aggregate grouped by an expression (`GROUP BY k % 10`)
//! gets a `Project` below it that computes the expression as `_groupingexpression`, and the
//! aggregates group by that column, so the exchange between them hashes
//! `_groupingexpression` and the final aggregate's result reads it back under the name the
//! query gave it. Where we differ: Spark's rule is a logical one and its `Project` keeps only
//! the columns the aggregate reads; ours runs on the partial and final aggregate pair as
//! DataFusion plans it, and its projection passes every input column on, the computed keys
//! after them. The distinct argument of a single-distinct rewrite stays as it is, as in
//! Spark's plans, which name it after the expression.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::projection::ProjectionExec;

use super::normalize_nan_and_zero::NORMALIZE_NAN_AND_ZERO;
use super::single_distinct_aggregate::SINGLE_DISTINCT_ALIAS;

/// Spark's name for a grouping expression pulled out into a projection.
pub const GROUPING_EXPRESSION: &str = "_groupingexpression";

pub fn pull_out_grouping_expressions(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(last) = node.downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let Some(partial) = last.input().downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let pulls_out = |(expr, name): &(Arc<dyn PhysicalExpr>, String)| {
            !unnormalized(expr).is::<Column>() && name != SINGLE_DISTINCT_ALIAS
        };
        let is_pair = matches!(last.mode(), AggregateMode::Final | AggregateMode::FinalPartitioned)
            && *partial.mode() == AggregateMode::Partial
            && partial.group_expr().is_single();
        if !is_pair || !partial.group_expr().expr().iter().any(pulls_out) {
            return Ok(Transformed::no(node));
        }
        let input = partial.input();
        let input_schema = input.schema();
        let mut projected: Vec<(Arc<dyn PhysicalExpr>, String)> = input_schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| (Arc::new(Column::new(field.name(), i)) as Arc<dyn PhysicalExpr>, field.name().clone()))
            .collect();
        let mut partial_keys = Vec::new();
        let mut final_keys = Vec::new();
        for (position, key) in partial.group_expr().expr().iter().enumerate() {
            let (expr, name) = key;
            let (input_key, partial_name) = if pulls_out(key) {
                let inner = unnormalized(expr);
                projected.push((Arc::clone(inner), GROUPING_EXPRESSION.to_string()));
                let pulled: Arc<dyn PhysicalExpr> = Arc::new(Column::new(GROUPING_EXPRESSION, projected.len() - 1));
                // A FLOAT or DOUBLE key stays normalized where it is grouped, as in Spark.
                let pulled =
                    if Arc::ptr_eq(inner, expr) { pulled } else { Arc::clone(expr).with_new_children(vec![pulled])? };
                (pulled, GROUPING_EXPRESSION.to_string())
            } else {
                (Arc::clone(expr), name.clone())
            };
            partial_keys.push((input_key, partial_name.clone()));
            // The final aggregate reads the partial's key and gives it back its own name.
            final_keys.push((Arc::new(Column::new(&partial_name, position)) as Arc<dyn PhysicalExpr>, name.clone()));
        }
        let projection: Arc<dyn ExecutionPlan> = Arc::new(ProjectionExec::try_new(projected, Arc::clone(input))?);
        let pulled_schema = projection.schema();
        let new_partial = Arc::new(AggregateExec::try_new(
            AggregateMode::Partial,
            PhysicalGroupBy::new_single(partial_keys),
            partial.aggr_expr().to_vec(),
            partial.filter_expr().to_vec(),
            projection,
            Arc::clone(&pulled_schema),
        )?);
        let new_last = AggregateExec::try_new(
            *last.mode(),
            PhysicalGroupBy::new_single(final_keys),
            last.aggr_expr().to_vec(),
            last.filter_expr().to_vec(),
            new_partial,
            pulled_schema,
        )?;
        Ok(Transformed::yes(Arc::new(new_last) as Arc<dyn ExecutionPlan>))
    })
    .map(|t| t.data)
}

/// A key without the NaN and -0.0 normalization a FLOAT or DOUBLE key gets, which Spark adds
/// while planning, after its optimizer pulled the expressions out.
fn unnormalized(key: &Arc<dyn PhysicalExpr>) -> &Arc<dyn PhysicalExpr> {
    match key.downcast_ref::<ScalarFunctionExpr>() {
        Some(function) if function.name() == NORMALIZE_NAN_AND_ZERO && function.args().len() == 1 => {
            &function.args()[0]
        }
        _ => key,
    }
}

/// Where no exchange came between the two aggregates, DataFusion combines them into one that
/// takes the partial's key names. Such a partial takes the query's names back first, so the
/// one aggregate gives the rows the names the plan above reads.
pub fn name_keys_for_combining(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(last) = node.downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let Some(partial) = last.input().downcast_ref::<AggregateExec>() else { return Ok(Transformed::no(node)) };
        let pulled = partial.group_expr().expr().iter().any(|(_, name)| name == GROUPING_EXPRESSION);
        if !pulled
            || *partial.mode() != AggregateMode::Partial
            || last.group_expr().expr().len() != partial.group_expr().expr().len()
        {
            return Ok(Transformed::no(node));
        }
        let keys = partial.group_expr().expr().iter().zip(last.group_expr().expr());
        let renamed = keys.map(|((expr, _), (_, name))| (Arc::clone(expr), name.clone())).collect();
        let new_partial = Arc::new(AggregateExec::try_new(
            AggregateMode::Partial,
            PhysicalGroupBy::new_single(renamed),
            partial.aggr_expr().to_vec(),
            partial.filter_expr().to_vec(),
            Arc::clone(partial.input()),
            partial.input_schema(),
        )?);
        let new_last = AggregateExec::try_new(
            *last.mode(),
            new_partial.group_expr().as_final(),
            last.aggr_expr().to_vec(),
            last.filter_expr().to_vec(),
            new_partial,
            last.input_schema(),
        )?;
        Ok(Transformed::yes(Arc::new(new_last) as Arc<dyn ExecutionPlan>))
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, lit};
    use datafusion::physical_plan::aggregates::AggregateMode;

    use super::*;
    use crate::planner::test_fixtures::*;

    fn grouped_by(key: Arc<dyn PhysicalExpr>, input: Plan) -> Plan {
        let partial = Arc::new(
            AggregateExec::try_new(
                AggregateMode::Partial,
                PhysicalGroupBy::new_single(vec![(key, "k % 10".to_string())]),
                Vec::new(),
                Vec::new(),
                Arc::clone(&input),
                input.schema(),
            )
            .expect("a partial aggregate"),
        );
        let keys = partial.group_expr().as_final();
        Arc::new(
            AggregateExec::try_new(AggregateMode::Final, keys, Vec::new(), Vec::new(), partial, input.schema())
                .expect("a final aggregate"),
        )
    }

    #[test]
    fn an_expression_key_is_computed_below_the_aggregates() {
        let input = scan(table("t", &[("k", "bigint"), ("j", "bigint")], None, &[]));
        let key = binary(column(&input, "k"), Operator::Modulo, lit(10i64), &input.schema()).expect("k % 10");
        let plan = pull_out_grouping_expressions(grouped_by(key, input)).expect("pulled out");
        let last = plan.downcast_ref::<AggregateExec>().expect("the final aggregate");
        assert_eq!(last.schema().field(0).name(), "k % 10", "the result keeps the query's name");
        let partial = last.input().downcast_ref::<AggregateExec>().expect("the partial aggregate");
        assert_eq!(partial.schema().field(0).name(), GROUPING_EXPRESSION);
        let projection = partial.input().downcast_ref::<ProjectionExec>().expect("the projection below");
        let schema = projection.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["k", "j", GROUPING_EXPRESSION]);
    }

    #[test]
    fn column_keys_are_left_alone() {
        let input = scan(table("t", &[("k", "bigint"), ("j", "bigint")], None, &[]));
        let plan = grouped_by(column(&input, "k"), input);
        let pulled = pull_out_grouping_expressions(Arc::clone(&plan)).expect("unchanged");
        assert!(Arc::ptr_eq(&plan, &pulled));
    }
}
