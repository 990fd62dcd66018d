//! Spark's `Window` of either of DataFusion's window operators: each function with its
//! window specification and frame, named after the select list's aliases.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, WindowExpr};

use super::{Converter, Position};
use crate::explain::expressions::{Columns, join, list, render, sort_order, window_frame};
use crate::explain::plan::{Node, Role, field};

impl Converter {
    /// Spark's `Window`; `names` renames its results by output position.
    pub(super) fn window(&mut self, (exprs, input): WindowParts, schema: &Schema, names: &[Option<String>]) -> Node {
        let child = self.convert(input, Position::default());
        let columns = Columns::Attrs(&child.output);
        let mut output = child.output.clone();
        let mut windows = Vec::new();
        for (i, expr) in exprs.iter().enumerate() {
            let function = expr.name().split('(').next().unwrap_or_default().to_lowercase();
            let args = join(expr.expressions().iter().map(|e| render(e, &columns)), ", ");
            let spec = expr
                .partition_by()
                .iter()
                .map(|e| render(e, &columns))
                .chain(expr.order_by().iter().map(|s| sort_order(render(&s.expr, &columns), s)))
                .chain([window_frame(expr.get_window_frame())]);
            let position = child.output.len() + i;
            let (data_type, nullable) = schema
                .fields()
                .get(position)
                .map_or((DataType::Null, true), |f| (f.data_type().clone(), f.is_nullable()));
            let name = names.get(position).and_then(Option::as_ref).map_or(expr.name(), String::as_str);
            let attr = self.fresh(name, data_type, nullable);
            windows.push(format!("{function}({args}) windowspecdefinition({}) AS {attr}", join(spec, ", ")));
            output.push(attr);
        }
        let (partition, order) = exprs.first().map_or_else(Default::default, |e| {
            (
                list(e.partition_by().iter().map(|p| render(p, &columns))),
                list(e.order_by().iter().map(|s| sort_order(render(&s.expr, &columns), s))),
            )
        });
        let arguments = format!("{}, {partition}, {order}", list(&windows));
        let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
        Node::new("Window", format!("Window {arguments}"), output, vec![child])
            .details(details)
            .role(Role::NeedsDistribution)
    }
}

pub(super) type WindowParts<'a> = (&'a [Arc<dyn WindowExpr>], &'a Arc<dyn ExecutionPlan>);

/// The window expressions and input of either of DataFusion's window operators.
pub(super) fn window_parts(plan: &Arc<dyn ExecutionPlan>) -> Option<WindowParts<'_>> {
    if let Some(window) = plan.downcast_ref::<WindowAggExec>() {
        return Some((window.window_expr(), window.input()));
    }
    plan.downcast_ref::<BoundedWindowAggExec>().map(|w| (w.window_expr(), w.input()))
}
