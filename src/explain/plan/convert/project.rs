//! Spark's `Filter` and `Project`: the columns a condition makes non-null, projections that
//! pass their input through dropped, and aggregate and window results named after the
//! select list's aliases.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, IsNotNullExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateOutputMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;

use super::window::window_parts;
use super::{Converter, Position, below_plumbing};
use crate::exec::short_circuit::split_conjunction;
use crate::explain::expressions::{Attr, Columns, list, render};
use crate::explain::plan::{Codegen, Node, field};

impl Converter {
    /// Spark's `Project` of a DataFusion projection, its aliases naming the results below it.
    pub(super) fn projection(&mut self, projection: &ProjectionExec, at: Position) -> Node {
        let child = self.convert_named(projection.input(), at, &column_aliases(projection));
        let input = projection.input().schema();
        // An aggregate that left out the grouping id the projection drops: the columns after
        // it move down one.
        let dropped =
            (child.output.len() < input.fields().len()).then(|| input.index_of("__grouping_id").ok()).flatten();
        let exprs = projection
            .expr()
            .iter()
            .map(|p| {
                let expr = match (dropped, p.expr.downcast_ref::<Column>()) {
                    (Some(gone), Some(c)) if c.index() > gone => {
                        Arc::new(Column::new(c.name(), c.index() - 1)) as Arc<dyn PhysicalExpr>
                    }
                    _ => Arc::clone(&p.expr),
                };
                (expr, p.alias.clone())
            })
            .collect();
        let fields = input.fields().iter().enumerate().filter(|(i, _)| Some(*i) != dropped).map(|(_, f)| Arc::clone(f));
        self.project(child, exprs, &Schema::new(fields.collect::<Vec<_>>()))
    }

    /// Converts the input of a projection. Spark names aggregate and window results after
    /// the select list's aliases, where DataFusion renames them in the projection above, also
    /// when a filter (a HAVING, or a filter pushed below the renaming) stands between.
    fn convert_named(&mut self, plan: &Arc<dyn ExecutionPlan>, at: Position, names: &[Option<String>]) -> Node {
        let inner = below_plumbing(plan);
        if let Some(filter) = inner.downcast_ref::<FilterExec>()
            && filter.projection().is_none()
            && final_aggregate(filter.input()).is_some()
        {
            let child = self.convert_named(filter.input(), Position::default(), names);
            self.filter_over(child, filter)
        } else if let Some(aggregate) = final_aggregate(plan) {
            self.aggregate(aggregate, names)
        } else if let Some(window) = window_parts(inner) {
            self.window(window, &inner.schema(), names)
        } else {
            self.convert(plan, at)
        }
    }

    pub(super) fn filter(&mut self, filter: &FilterExec) -> Node {
        let child = self.convert(filter.input(), Position::default());
        self.filter_over(child, filter)
    }

    fn filter_over(&mut self, child: Node, filter: &FilterExec) -> Node {
        let condition = render(filter.predicate(), &Columns::Attrs(&child.output));
        // Spark's FilterExec: columns the condition requires to be non-null are non-null above it.
        let non_null: Vec<usize> = split_conjunction(filter.predicate())
            .into_iter()
            .filter_map(|c| c.downcast_ref::<IsNotNullExpr>()?.arg().downcast_ref::<Column>().map(Column::index))
            .collect();
        let output: Vec<Attr> = child
            .output
            .iter()
            .enumerate()
            .map(|(i, a)| Attr { nullable: a.nullable && !non_null.contains(&i), ..a.clone() })
            .collect();
        let details = vec![field("Input", &child.output), format!("Condition : {condition}")];
        let node = Node::new("Filter", format!("Filter {condition}"), output, vec![child])
            .details(details)
            .codegen(Codegen::Yes);
        match filter.projection() {
            Some(projection) => {
                let schema = filter.input().schema();
                let exprs = projection
                    .iter()
                    .map(|i| {
                        (
                            Arc::new(Column::new(schema.field(*i).name(), *i)) as Arc<dyn PhysicalExpr>,
                            schema.field(*i).name().clone(),
                        )
                    })
                    .collect();
                self.project(node, exprs, &schema)
            }
            None => node,
        }
    }

    /// Spark's `Project`, or its child when it passes the child's columns through unchanged
    /// (`RemoveRedundantProjects`).
    fn project(&mut self, child: Node, exprs: Vec<(Arc<dyn PhysicalExpr>, String)>, input: &Schema) -> Node {
        let passthrough: Vec<Option<Attr>> = exprs
            .iter()
            .map(|(expr, alias)| {
                expr.downcast_ref::<Column>()
                    .and_then(|c| child.output.get(c.index()))
                    .filter(|a| a.name == *alias)
                    .cloned()
            })
            .collect();
        let identity = passthrough.len() == child.output.len()
            && passthrough.iter().zip(&child.output).all(|(p, a)| p.as_ref().is_some_and(|p| p.id == a.id));
        if identity {
            return child;
        }
        let mut output = Vec::new();
        let mut projected = Vec::new();
        for ((expr, alias), passed) in exprs.iter().zip(passthrough) {
            match passed {
                Some(attr) => {
                    projected.push(attr.to_string());
                    output.push(attr);
                }
                None => {
                    let data_type = expr.data_type(input).unwrap_or(DataType::Null);
                    let attr = self.fresh(alias, data_type, expr.nullable(input).unwrap_or(true));
                    projected.push(format!("{} AS {attr}", render(expr, &Columns::Attrs(&child.output))));
                    output.push(attr);
                }
            }
        }
        let details = vec![field("Output", &output), field("Input", &child.output)];
        Node::new("Project", format!("Project {}", list(&projected)), output, vec![child])
            .details(details)
            .codegen(Codegen::Yes)
    }
}

/// The name a projection gives each of its input's columns, by input position.
fn column_aliases(projection: &ProjectionExec) -> Vec<Option<String>> {
    let mut names = vec![None; projection.input().schema().fields().len()];
    for p in projection.expr() {
        if let Some(name) = p.expr.downcast_ref::<Column>().and_then(|c| names.get_mut(c.index())) {
            name.get_or_insert_with(|| p.alias.clone());
        }
    }
    names
}

/// Whether a projection over `plan` gives its results their names (see `convert_named`).
pub(super) fn named_by_projection(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let inner = below_plumbing(plan);
    final_aggregate(plan).is_some()
        || window_parts(inner).is_some()
        || inner.downcast_ref::<FilterExec>().is_some_and(|f| final_aggregate(f.input()).is_some())
}

/// The aggregate giving final results that `plan` is, under DataFusion's plumbing.
fn final_aggregate(plan: &Arc<dyn ExecutionPlan>) -> Option<&AggregateExec> {
    below_plumbing(plan)
        .downcast_ref::<AggregateExec>()
        .filter(|aggregate| aggregate.mode().output_mode() == AggregateOutputMode::Final)
}
