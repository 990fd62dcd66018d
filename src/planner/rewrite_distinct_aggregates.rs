//! Spark's `RewriteDistinctAggregates`: an aggregate with distinct aggregates over more than one
//! set of arguments (`count(DISTINCT a), count(DISTINCT z)`) is planned in two levels. Spark's
//! `Expand` emits each row once per distinct argument (the other arguments NULL) with a `gid`
//! telling the copies apart, and once more for the other aggregates; the inner aggregate groups
//! by the keys, the arguments and `gid`, computing the other aggregates; the outer one groups by
//! the keys, each distinct aggregate reading its argument's copies (`FILTER (WHERE gid = n)`),
//! each other aggregate taking its value from the copy of `gid` 0, or its value over no rows
//! (`count`'s 0, Spark's `merge_count`) where there is none. So two exchanges move the rows, where DataFusion would
//! keep a set of distinct values per group.
//!
//! Where we differ: the inner level is a grouping-sets aggregate (one set per argument, with the
//! keys; one of the keys alone for the other aggregates), whose expanding DataFusion's partial
//! aggregate does, under our `Expand`; `gid` is DataFusion's grouping id, and the other
//! aggregates are computed for every set, only the keys' set's being read. A column argument is
//! named as Spark names it (`spark_catalog.default.t.a`), another as DataFusion prints it. Only
//! aggregates of one argument, none also a key, without `FILTER` or `ORDER BY`, are rewritten;
//! others stay DataFusion's.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ScalarValue, TableReference};
use datafusion::error::Result;
use datafusion::functions_aggregate::first_last::first_value_udaf;
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams};
use datafusion::logical_expr::{Aggregate, Expr, ExprSchemable, GroupingSet, LogicalPlan, Projection, lit};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::single_distinct_aggregate::merge_count;

#[derive(Debug, Default)]
pub struct RewriteDistinctAggregates;

impl OptimizerRule for RewriteDistinctAggregates {
    fn name(&self) -> &str {
        "rewrite_distinct_aggregates"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(aggregate) = plan else { return Ok(Transformed::no(plan)) };
        match rewritten(&aggregate)? {
            Some(plan) => Ok(Transformed::yes(plan)),
            None => Ok(Transformed::no(LogicalPlan::Aggregate(aggregate))),
        }
    }
}

/// Whether a grouping-sets aggregate's keys, by their names, are the distinct arguments this
/// rule expanded: Spark's names for them are qualified, as no column's own name is.
pub fn expands_distinct_arguments<'a>(mut key_names: impl Iterator<Item = &'a str>) -> bool {
    key_names.any(|name| name.contains('.'))
}

/// An aggregate function of the plan, with its output name.
struct Call<'a> {
    function: &'a AggregateFunction,
    /// The distinct argument's position among the arguments, for a distinct aggregate.
    argument: Option<usize>,
}

fn rewritten(aggregate: &Aggregate) -> Result<Option<LogicalPlan>> {
    if aggregate.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
        return Ok(None);
    }
    let mut arguments: Vec<&Expr> = Vec::new();
    let mut calls = Vec::new();
    for expr in &aggregate.aggr_expr {
        let Expr::AggregateFunction(function) = unaliased(expr) else { return Ok(None) };
        let AggregateFunctionParams { args, distinct, filter, order_by, .. } = &function.params;
        if filter.is_some() || !order_by.is_empty() {
            return Ok(None);
        }
        if !*distinct {
            calls.push(Call { function, argument: None });
            continue;
        }
        let [argument] = args.as_slice() else { return Ok(None) };
        let position = arguments.iter().position(|a| *a == argument).unwrap_or_else(|| {
            arguments.push(argument);
            arguments.len() - 1
        });
        calls.push(Call { function, argument: Some(position) });
    }
    if arguments.len() < 2 || arguments.iter().any(|a| aggregate.group_expr.contains(a)) {
        return Ok(None);
    }
    let tables = scanned_tables(&aggregate.input);
    let argument_keys: Vec<Expr> = arguments.iter().map(|a| (*a).clone().alias(spark_name(a, &tables))).collect();
    let regular = calls.iter().any(|c| c.argument.is_none());

    // One set per argument, with the keys; the keys alone for the other aggregates.
    let keys = &aggregate.group_expr;
    let mut sets: Vec<Vec<Expr>> =
        argument_keys.iter().map(|argument| keys.iter().cloned().chain([argument.clone()]).collect()).collect();
    if regular {
        sets.push(keys.clone());
    }
    let regular_aggregates: Vec<Expr> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.argument.is_none())
        .map(|(i, c)| Expr::AggregateFunction(c.function.clone()).alias(regular_name(i)))
        .collect();
    let inner = Aggregate::try_new(
        Arc::clone(&aggregate.input),
        vec![Expr::GroupingSet(GroupingSet::GroupingSets(sets))],
        regular_aggregates,
    )?;
    let inner_schema = Arc::clone(&inner.schema);
    let column_of = |i: usize| Expr::Column(Column::from(inner_schema.qualified_field(i)));
    let (key_count, argument_count) = (keys.len(), arguments.len());
    // DataFusion's grouping id: a bit for each grouping column not in the set, the first
    // column's the highest; the keys are in every set.
    let grouping_id = |set: Option<usize>| {
        let all = (1u64 << argument_count) - 1;
        let id = set.map_or(all, |i| all & !(1 << (argument_count - 1 - i)));
        let value = match key_count + argument_count {
            0..=8 => ScalarValue::UInt8(Some(id as u8)),
            9..=16 => ScalarValue::UInt16(Some(id as u16)),
            17..=32 => ScalarValue::UInt32(Some(id as u32)),
            _ => ScalarValue::UInt64(Some(id)),
        };
        Box::new(Expr::Column(Column::from_name(Aggregate::INTERNAL_GROUPING_ID)).eq(lit(value)))
    };

    let outer_keys: Vec<Expr> = (0..key_count).map(column_of).collect();
    let mut outer_aggregates = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let (func, args) = match call.argument {
            Some(position) => (Arc::clone(&call.function.func), vec![column_of(key_count + position)]),
            None => {
                // A count is 0, not NULL, where no row reached its level.
                let counts = call.function.func.default_value(&DataType::Int64)? == ScalarValue::Int64(Some(0));
                let computed = Expr::Column(Column::from_name(regular_name(i)));
                (if counts { merge_count() } else { first_value_udaf() }, vec![computed])
            }
        };
        let filter = Some(grouping_id(call.argument));
        let function = AggregateFunction::new_udf(func, args, false, filter, Vec::new(), None);
        outer_aggregates.push(Expr::AggregateFunction(function).alias(format!("outer_{i}")));
    }
    let outer = Aggregate::try_new(Arc::new(LogicalPlan::Aggregate(inner)), outer_keys, outer_aggregates)?;
    let outer_schema = Arc::clone(&outer.schema);

    // The aggregate's own names.
    let exprs = aggregate
        .schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            Expr::Column(Column::from(outer_schema.qualified_field(i)))
                .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    let projection = Projection::try_new(exprs, Arc::new(LogicalPlan::Aggregate(outer)))?;
    // The projection must type its columns as the aggregate did.
    for (expr, field) in projection.expr.iter().zip(aggregate.schema.fields()) {
        if expr.get_type(projection.input.schema())? != *field.data_type() {
            return Ok(None);
        }
    }
    Ok(Some(LogicalPlan::Projection(projection)))
}

/// The inner level's name for the aggregate at `position` that is not distinct.
fn regular_name(position: usize) -> String {
    format!("regular_{position}")
}

fn unaliased(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => &alias.expr,
        other => other,
    }
}

/// The tables `plan` scans, by the names its columns are qualified with.
fn scanned_tables(plan: &LogicalPlan) -> HashSet<TableReference> {
    let mut tables = HashSet::new();
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            tables.insert(scan.table_name.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    tables
}

/// Spark's `sql` of a column: `spark_catalog.<schema>.<table>.<column>` for a table's column,
/// `<alias>.<column>` for an alias's. Another expression is named as DataFusion prints it, its
/// columns qualified.
fn spark_name(argument: &Expr, tables: &HashSet<TableReference>) -> String {
    let Expr::Column(column) = argument else { return argument.to_string() };
    match &column.relation {
        Some(relation) if tables.contains(relation) => {
            let schema = relation.schema().unwrap_or(crate::catalog::metastore::DEFAULT_SCHEMA);
            format!("spark_catalog.{schema}.{}.{}", relation.table(), column.name)
        }
        Some(relation) => format!("{relation}.{}", column.name),
        None => column.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_named_as_spark_names_them() {
        let tables = HashSet::from([TableReference::bare("flat")]);
        let column = |relation: &str| Expr::Column(Column::new(Some(relation), "a"));
        assert_eq!(spark_name(&column("flat"), &tables), "spark_catalog.default.flat.a");
        assert_eq!(spark_name(&column("f"), &tables), "f.a");
        assert!(expands_distinct_arguments(["b", "spark_catalog.default.flat.a"].into_iter()));
        assert!(!expands_distinct_arguments(["b", "a"].into_iter()));
    }
}
