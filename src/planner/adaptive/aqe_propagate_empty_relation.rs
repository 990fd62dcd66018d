//! Spark's `AQEPropagateEmptyRelation`: once a query stage has run and produced no rows, what
//! above it can give no rows either is not run. Bottom-up, up to the stages that ran:
//! - an inner or semi join with an empty side, a left (right) outer or anti join with an empty
//!   left (right) side, a full outer join with both sides empty, and a projection, filter or
//!   sort over nothing become an `EmptyRelation`;
//! - a grouped final aggregate over an empty stage does too (an ungrouped one still answers
//!   its one row);
//! - an outer join with the other side empty becomes its kept side with nulls for the empty
//!   side's columns, and a left anti join with an empty right side its left side;
//! - a union drops its empty children.
//!
//! Where we differ: Spark re-plans the logical plan and prints the plan it eliminated below the
//! `EmptyRelation`; we rewrite the physical plan and print that plan as Spark's logical names
//! for its operators. A join's side kept without its join keeps no sort the join needed,
//! unless something above needs the order.

use std::sync::Arc;

use datafusion::common::{JoinType, ScalarValue};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};
use datafusion::physical_plan::{ExecutionPlan, replace_children_if_necessary};

use crate::exec::aqe_shuffle_read::AqeShuffleReadExec;
use crate::exec::empty_relation::{EmptyRelationExec, LogicalOutline};
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::exec::join::SparkJoinExec;
use crate::exec::plumbing::plumbing_input;
use crate::exec::query_stage::{BroadcastQueryStageExec, ShuffleQueryStageExec};
use crate::exec::sort::SortExec;
use crate::planner::union_output_partitioning::with_new_inputs;

type Plan = Arc<dyn ExecutionPlan>;

/// Spark's rule, over the plan of an adaptive run once its latest stages have run.
pub fn propagate_empty_relation(plan: Plan) -> Result<Plan> {
    propagate(plan, false)
}

/// `order_needed`: whether what reads `plan` relies on its order.
fn propagate(plan: Plan, order_needed: bool) -> Result<Plan> {
    if plan.is::<ShuffleQueryStageExec>() || plan.is::<BroadcastQueryStageExec>() {
        return Ok(plan);
    }
    let orderings = plan.required_input_ordering();
    let maintains = plan.maintains_input_order();
    let children = plan
        .children()
        .into_iter()
        .enumerate()
        .map(|(i, child)| {
            let needed = orderings.get(i).is_some_and(Option::is_some)
                || order_needed && maintains.get(i).copied().unwrap_or(false);
            propagate(Arc::clone(child), needed)
        })
        .collect::<Result<Vec<_>>>()?;
    if plan.is::<UnionExec>() || plan.is::<InterleaveExec>() {
        return union(plan, children);
    }
    let plan = replace_children_if_necessary(plan, children)?;
    if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
        return joined(&plan, join, order_needed);
    }
    if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        let grouped_final = matches!(aggregate.mode(), AggregateMode::Final | AggregateMode::FinalPartitioned)
            && !aggregate.group_expr().expr().is_empty();
        if grouped_final && let Some(stage) = empty_stage(aggregate.input()) {
            // The stage stands for the whole aggregate, as Spark's `LogicalQueryStage` does.
            return Ok(Arc::new(EmptyRelationExec::new(&plan, stage_outline(stage), ran_below(&plan)).of_aggregate()));
        }
        return Ok(plan);
    }
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>()
        && let Some(aggregate) = bare(projection.input()).downcast_ref::<EmptyRelationExec>()
        && aggregate.is_aggregate()
        && projection.expr().iter().all(|p| p.expr.is::<Column>())
    {
        // A projection naming an aggregate's results is part of Spark's aggregate.
        return Ok(empty(&plan, aggregate.logical().clone()));
    }
    let name = if plan.is::<ProjectionExec>() {
        "Project"
    } else if plan.is::<FilterExec>() {
        "Filter"
    } else if plan.is::<SortExec>() {
        "Sort"
    } else {
        return Ok(plan);
    };
    match plan.children().first() {
        Some(input) if is_empty(input) => Ok(empty(&plan, LogicalOutline::new(name, logical_outline(bare(input))))),
        _ => Ok(plan),
    }
}

/// A union without its empty children: nothing if all are, the one left under the union's
/// names if one is.
fn union(plan: Plan, children: Vec<Plan>) -> Result<Plan> {
    let (empty_children, rest): (Vec<Plan>, Vec<Plan>) = children.into_iter().partition(is_empty);
    if empty_children.is_empty() {
        return with_new_inputs(plan, rest);
    }
    let interleaves = plan.is::<InterleaveExec>();
    match rest.as_slice() {
        [] => {
            let children = empty_children.iter().flat_map(logical_outline).collect();
            Ok(empty(&plan, LogicalOutline::new("Union", children)))
        }
        [only] => {
            let (union_schema, only_schema) = (plan.schema(), only.schema());
            let pairs = only_schema.fields().iter().zip(union_schema.fields()).enumerate();
            let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = pairs
                .map(|(i, (field, named))| (Arc::new(Column::new(field.name(), i)) as _, named.name().clone()))
                .collect();
            Ok(Arc::new(ProjectionExec::try_new(exprs, Arc::clone(only))?))
        }
        _ if interleaves => Ok(Arc::new(InterleaveExec::try_new(rest)?)),
        _ => UnionExec::try_new(rest),
    }
}

fn joined(plan: &Plan, join: &SparkJoinExec, order_needed: bool) -> Result<Plan> {
    let (left, right) = (join.left(), join.right());
    let (left_empty, right_empty) = (is_empty(left), is_empty(right));
    let outline = || {
        let children = [left, right].into_iter().flat_map(logical_outline).collect();
        LogicalOutline::new("Join", children)
    };
    let kept = |side: &Plan| if order_needed { Arc::clone(side) } else { Arc::clone(below_sort(side)) };
    Ok(match join.spec().join_type {
        JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi if left_empty || right_empty => {
            empty(plan, outline())
        }
        JoinType::Left | JoinType::LeftAnti if left_empty => empty(plan, outline()),
        JoinType::Right | JoinType::RightAnti if right_empty => empty(plan, outline()),
        JoinType::Full if left_empty && right_empty => empty(plan, outline()),
        JoinType::Left | JoinType::Full if right_empty => with_nulls(plan, &kept(left), 0)?,
        JoinType::Right | JoinType::Full if left_empty => with_nulls(plan, &kept(right), left.schema().fields().len())?,
        JoinType::LeftAnti if right_empty && !join.spec().null_aware => kept(left),
        _ => Arc::clone(plan),
    })
}

/// The join's rows from one side alone: that side's columns from `offset` of the join's
/// output, every other column NULL.
fn with_nulls(join: &Plan, side: &Plan, offset: usize) -> Result<Plan> {
    let side_schema = side.schema();
    let width = side_schema.fields().len();
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = Vec::with_capacity(join.schema().fields().len());
    for (i, field) in join.schema().fields().iter().enumerate() {
        let expr: Arc<dyn PhysicalExpr> = if (offset..offset + width).contains(&i) {
            let column = &side_schema.fields()[i - offset];
            Arc::new(Column::new(column.name(), i - offset))
        } else {
            Arc::new(Literal::new(ScalarValue::try_from(field.data_type())?))
        };
        exprs.push((expr, field.name().clone()));
    }
    Ok(Arc::new(ProjectionExec::try_new(exprs, Arc::clone(side))?))
}

fn empty(plan: &Plan, logical: LogicalOutline) -> Plan {
    Arc::new(EmptyRelationExec::new(plan, logical, ran_below(plan)))
}

/// The query stages that ran below `plan`, through the empty relations it holds.
fn ran_below(plan: &Plan) -> Vec<Plan> {
    if plan.is::<ShuffleQueryStageExec>() || plan.is::<BroadcastQueryStageExec>() {
        return vec![Arc::clone(plan)];
    }
    if let Some(empty) = plan.downcast_ref::<EmptyRelationExec>() {
        return empty.ran().to_vec();
    }
    plan.children().into_iter().flat_map(ran_below).collect()
}

fn is_empty(plan: &Plan) -> bool {
    empty_stage(plan).is_some() || bare(plan).is::<EmptyRelationExec>()
}

/// The query stage that ran and produced no rows, that `plan` reads (through its sort, its
/// shuffle read and plumbing).
fn empty_stage(plan: &Plan) -> Option<&Plan> {
    let stage = bare(plan);
    let rows = if let Some(shuffle) = stage.downcast_ref::<ShuffleQueryStageExec>() {
        shuffle.statistics().total_rows()
    } else {
        stage.downcast_ref::<BroadcastQueryStageExec>()?.rows()
    };
    (rows == 0).then_some(stage)
}

fn bare(mut plan: &Plan) -> &Plan {
    loop {
        plan = match plumbing_input(plan) {
            Some(inner) => inner,
            None if plan.is::<SortExec>() || plan.is::<AqeShuffleReadExec>() => plan.children()[0],
            None => return plan,
        };
    }
}

fn below_sort(plan: &Plan) -> &Plan {
    match plan.downcast_ref::<SortExec>() {
        Some(_) => plan.children()[0],
        None => plan,
    }
}

/// A stage as Spark's `LogicalQueryStage` prints: the logical plan it ran.
fn stage_outline(stage: &Plan) -> LogicalOutline {
    LogicalOutline::new("LogicalQueryStage", logical_outline(stage.children()[0]))
}

/// `plan` as Spark's logical operators: what exchanges, sorts for joins and reads add has no
/// logical operator, and a partial and a final aggregate are one.
fn logical_outline(plan: &Plan) -> Vec<LogicalOutline> {
    let below = || plan.children().into_iter().flat_map(logical_outline).collect::<Vec<_>>();
    if plan.is::<ShuffleQueryStageExec>() || plan.is::<BroadcastQueryStageExec>() {
        return vec![stage_outline(plan)];
    }
    let name = match plan.downcast_ref::<AggregateExec>() {
        Some(aggregate) if matches!(aggregate.mode(), AggregateMode::Final | AggregateMode::FinalPartitioned) => {
            return below();
        }
        Some(_) => "Aggregate",
        None if plan.is::<ProjectionExec>() => "Project",
        None if plan.is::<FilterExec>() => "Filter",
        None if plan.is::<FileSourceScanExec>() => "LogicalRelation",
        None if plan.is::<SparkJoinExec>() => "Join",
        None if plan.is::<UnionExec>() => "Union",
        None if plan.is::<EmptyRelationExec>() => "EmptyRelation",
        None if plan.children().len() == 1 => return below(),
        None => plan.name(),
    };
    vec![LogicalOutline::new(name, below())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::join_spec::JoinStrategy;
    use crate::planner::test_fixtures::Plan;
    use crate::planner::test_fixtures::*;

    fn joined(join_type: JoinType, left_rows: u64, right_rows: u64) -> Plan {
        let left = hash_stage(0, "l", &["a"], vec![vec![left_rows, 0]]);
        let right = hash_stage(1, "r", &["a"], vec![vec![0, right_rows]]);
        join_by_name(JoinStrategy::SortMerge, None, join_type, (left, &["a"]), (right, &["a"]))
    }

    /// An inner join over a stage that ran empty gives nothing, and says what it stood for.
    #[test]
    fn an_inner_join_with_an_empty_side_is_empty() {
        let plan = propagate_empty_relation(joined(JoinType::Inner, 10, 0)).expect("propagated");
        let empty = plan.downcast_ref::<EmptyRelationExec>().expect("an empty relation");
        assert_eq!(empty.logical().name, "Join");
        assert_eq!(empty.logical().children[0].name, "LogicalQueryStage");
    }

    /// A left join with nothing on its right is its left side, the right's columns NULL.
    #[test]
    fn a_left_join_with_an_empty_right_side_keeps_its_left_rows() {
        let join = joined(JoinType::Left, 10, 0);
        let plan = propagate_empty_relation(Arc::clone(&join)).expect("propagated");
        let projection = plan.downcast_ref::<ProjectionExec>().expect("the left side with nulls");
        assert_eq!(projection.schema(), join.schema());
        assert!(projection.input().is::<ShuffleQueryStageExec>());
    }

    /// A union drops a child that ran empty; all empty, it is empty itself.
    #[test]
    fn a_union_drops_its_empty_children() {
        let stage = |id: usize, rows: u64| hash_stage(id, "u", &["a"], vec![vec![rows, 0]]);
        let union = UnionExec::try_new(vec![stage(0, 4), stage(1, 0), stage(2, 3)]).expect("a union");
        let kept = propagate_empty_relation(union).expect("propagated");
        assert_eq!(kept.children().len(), 2, "{kept:?}");
        let one = UnionExec::try_new(vec![stage(0, 0), stage(1, 5)]).expect("a union");
        assert!(propagate_empty_relation(one).expect("propagated").is::<ProjectionExec>());
        let none = UnionExec::try_new(vec![stage(0, 0), stage(1, 0)]).expect("a union");
        assert!(propagate_empty_relation(none).expect("propagated").is::<EmptyRelationExec>());
    }

    #[test]
    fn a_join_keeps_what_an_empty_side_leaves() {
        let join = joined(JoinType::Inner, 10, 3);
        let plan = propagate_empty_relation(Arc::clone(&join)).expect("propagated");
        assert!(Arc::ptr_eq(&plan, &join));
        let left_empty = joined(JoinType::Right, 0, 5);
        assert!(propagate_empty_relation(left_empty).expect("propagated").is::<ProjectionExec>());
        let right_empty = joined(JoinType::Right, 10, 0);
        assert!(propagate_empty_relation(right_empty).expect("propagated").is::<EmptyRelationExec>());
    }
}
