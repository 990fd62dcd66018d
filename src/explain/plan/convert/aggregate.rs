//! Spark's `HashAggregate` of DataFusion's aggregates: partial and final phases with Spark's
//! `partial_`/`merge_` prefixes, buffer attributes and results, a merging aggregate's
//! functions reading what its partial aggregate read.

use datafusion::arrow::datatypes::DataType;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateInputMode, AggregateMode, AggregateOutputMode};

use super::{Converter, Position, SPARK_GROUPING_ID, address};
use crate::exec::expand::ExpandExec;
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::explain::expressions::{Attr, Columns, join, key, list, render};
use crate::explain::plan::{Codegen, Node, Role, field};
use crate::planner::rewrite_distinct_aggregates::expands_distinct_arguments;
use crate::planner::single_distinct_aggregate::SINGLE_DISTINCT_ALIAS;

/// Spark's name for the grouping id of its rewrite of several distinct aggregates.
const DISTINCT_GROUPING_ID: &str = "gid";

impl Converter {
    /// Spark's `HashAggregate`; `names` renames its results by output position.
    pub(super) fn aggregate(&mut self, aggregate: &AggregateExec, names: &[Option<String>]) -> Node {
        let child = match aggregate.input().downcast_ref::<ExpandExec>() {
            Some(expand) => self.expand(expand, aggregate),
            None => self.convert(aggregate.input(), Position::default()),
        };
        let mode = aggregate.mode();
        let raw_input = mode.input_mode() == AggregateInputMode::Raw;
        let input_schema = aggregate.input().schema();
        let columns = Columns::Attrs(&child.output);

        let mut keys = Vec::new();
        let mut key_attrs = Vec::new();
        for (expr, alias) in aggregate.group_expr().expr() {
            // The distinct argument keeps its name in Spark's keys.
            let passed = expr
                .downcast_ref::<Column>()
                .and_then(|c| child.output.get(c.index()))
                .filter(|a| a.name == *alias || alias == SINGLE_DISTINCT_ALIAS || alias == "__grouping_id");
            let text = if raw_input { key(expr, &input_schema, &columns) } else { render(expr, &columns) };
            let attr = match passed {
                Some(attr) => attr.clone(),
                None => {
                    let data_type = expr.data_type(&input_schema).unwrap_or(DataType::Null);
                    self.fresh(alias, data_type, expr.nullable(&input_schema).unwrap_or(true))
                }
            };
            keys.push(if passed.is_some() && text == attr.to_string() { text } else { format!("{text} AS {attr}") });
            key_attrs.push(attr);
        }
        // Grouping sets also group by the `spark_grouping_id` that Expand appended.
        if raw_input
            && aggregate.group_expr().has_grouping_set()
            && let Some(grouping_id) =
                child.output.last().filter(|a| a.name == SPARK_GROUPING_ID || a.name == DISTINCT_GROUPING_ID)
        {
            keys.push(grouping_id.to_string());
            key_attrs.push(grouping_id.clone());
        }

        // A merging aggregate's functions read the columns its partial aggregate read.
        let raw_attrs = if raw_input {
            child.output.clone()
        } else {
            self.partial_input_of(aggregate).unwrap_or_else(|| child.output.clone())
        };
        let prefix = match mode {
            AggregateMode::Partial => "partial_",
            AggregateMode::PartialReduce => "merge_",
            _ => "",
        };
        let mut functions = Vec::new();
        let mut aggregate_attrs = Vec::new();
        let mut results = Vec::new();
        let mut output = Vec::new();
        for (i, attr) in key_attrs.iter().enumerate() {
            // Spark's results leave out the grouping id, which the projection above drops.
            if mode.output_mode() == AggregateOutputMode::Final
                && attr.name == SPARK_GROUPING_ID
                && matches!(names.get(i), Some(None))
            {
                continue;
            }
            match names.get(i).and_then(Option::as_ref).filter(|n| **n != attr.name) {
                Some(name) => {
                    let renamed = self.fresh(name, attr.data_type.clone(), attr.nullable);
                    results.push(format!("{attr} AS {renamed}"));
                    output.push(renamed);
                }
                None => {
                    results.push(attr.to_string());
                    output.push(attr.clone());
                }
            }
        }
        let mut buffers = Vec::new();
        for (i, function) in aggregate.aggr_expr().iter().enumerate() {
            let args = join(function.expressions().iter().map(|e| render(e, &Columns::Attrs(&raw_attrs))), ", ");
            let distinct = if function.is_distinct() { "distinct " } else { "" };
            let call = format!("{}({distinct}{args})", function.fun().name());
            let filter = match aggregate.filter_expr().get(i) {
                Some(Some(filter)) if raw_input => format!(" FILTER (WHERE {})", render(filter, &columns)),
                _ => String::new(),
            };
            functions.push(format!("{prefix}{call}{filter}"));
            if mode.output_mode() == AggregateOutputMode::Partial {
                buffers.extend(function.state_fields().unwrap_or_default());
            } else {
                let field = function.field();
                let attr = self.fresh(&call, field.data_type().clone(), field.is_nullable());
                let schema = aggregate.schema();
                let position = key_attrs.len() + i;
                let name = names
                    .get(position)
                    .and_then(Option::as_ref)
                    .or(schema.fields().get(position).map(|f| f.name()))
                    .map_or(function.name(), String::as_str);
                let result = self.fresh(name, field.data_type().clone(), field.is_nullable());
                results.push(format!("{attr} AS {result}"));
                aggregate_attrs.push(attr);
                output.push(result);
            }
        }
        // A partial aggregate's buffers: Spark's `aggBufferAttributes`, then their copies as results.
        for state in &buffers {
            aggregate_attrs.push(self.fresh(state_name(state.name()), state.data_type().clone(), state.is_nullable()));
        }
        for state in &buffers {
            let result = self.fresh(state_name(state.name()), state.data_type().clone(), state.is_nullable());
            results.push(result.to_string());
            output.push(result);
        }
        if raw_input && mode.output_mode() == AggregateOutputMode::Partial {
            self.partial_inputs.insert(address(aggregate), child.output.clone());
        }

        let simple =
            format!("HashAggregate(keys={}, functions={}, output={})", list(&keys), list(&functions), list(&output));
        let details = vec![
            field("Input", &child.output),
            field("Keys", &keys),
            field("Functions", &functions),
            field("Aggregate Attributes", &aggregate_attrs),
            field("Results", &results),
        ];
        let role = match mode.output_mode() {
            AggregateOutputMode::Final => Role::NeedsDistribution,
            AggregateOutputMode::Partial => Role::Other,
        };
        Node::new("HashAggregate", simple, output, vec![child]).details(details).codegen(Codegen::Yes).role(role)
    }

    /// Spark's `Expand` under a grouping-sets aggregate: one projection of the input per
    /// grouping set, the keys it leaves out NULL, and the set's `spark_grouping_id` (bit
    /// `n - 1 - i` set when key `i` is left out), with fresh attributes for the keys.
    fn expand(&mut self, expand: &ExpandExec, aggregate: &AggregateExec) -> Node {
        let child = self.convert(expand.input(), Position::default());
        let group_by = aggregate.group_expr();
        let keys: Vec<Option<usize>> =
            group_by.expr().iter().map(|(e, _)| e.downcast_ref::<Column>().map(Column::index)).collect();
        let key_count = keys.len();
        let projections: Vec<String> = group_by
            .groups()
            .iter()
            .map(|nulls| {
                let mut values: Vec<String> = child.output.iter().map(ToString::to_string).collect();
                let mut grouping_id = 0u64;
                for (i, (key, null)) in keys.iter().zip(nulls).enumerate() {
                    let value = match (key, null) {
                        (_, true) => "null".to_string(),
                        (Some(index), false) => child.output.get(*index).map_or_else(String::new, ToString::to_string),
                        (None, false) => String::new(),
                    };
                    values.push(value);
                    if *null {
                        grouping_id |= 1 << (key_count - 1 - i);
                    }
                }
                values.push(grouping_id.to_string());
                list(&values)
            })
            .collect();
        let mut output = child.output.clone();
        for (expr, alias) in group_by.expr() {
            let input_schema = expand.input().schema();
            let data_type = expr.data_type(&input_schema).unwrap_or(DataType::Null);
            output.push(self.fresh(alias, data_type, true));
        }
        // Spark's rewrite of several distinct aggregates calls its grouping id `gid`, an INT.
        let names = group_by.expr().iter().map(|(_, name)| name.as_str());
        let grouping_id = match expands_distinct_arguments(names) {
            true => self.fresh(DISTINCT_GROUPING_ID, DataType::Int32, false),
            false => self.fresh(SPARK_GROUPING_ID, DataType::Int64, false),
        };
        output.push(grouping_id);
        let arguments = format!("{}, {}", list(&projections), list(&output));
        let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
        Node::new("Expand", format!("Expand {arguments}"), output, vec![child]).details(details).codegen(Codegen::Yes)
    }

    /// The input attributes of the partial aggregate below a merging one, found through
    /// the exchanges and other single-input operators between them.
    fn partial_input_of(&self, aggregate: &AggregateExec) -> Option<Vec<Attr>> {
        let mut plan = aggregate.input();
        loop {
            if let Some(partial) = plan.downcast_ref::<AggregateExec>() {
                return self.partial_inputs.get(&address(partial)).cloned();
            }
            // A reused exchange's partial aggregate is the one below the exchange it reads.
            if let Some(child) = plan.downcast_ref::<ReusedExchangeExec>().and_then(|r| r.exchange().children().pop()) {
                plan = child;
                continue;
            }
            match plan.children().as_slice() {
                [child] => plan = child,
                _ => return None,
            }
        }
    }
}

/// `count` from DataFusion's state field name `count(x)[count]`.
fn state_name(name: &str) -> &str {
    name.rsplit_once('[').and_then(|(_, rest)| rest.strip_suffix(']')).unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names() {
        assert_eq!(state_name("sum(t.amount)[sum]"), "sum");
    }
}
