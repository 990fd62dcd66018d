//! Spark's `WidenSetOperationTypes` (`TypeCoercion.scala`) for EXCEPT and INTERSECT, with and
//! without ALL: each column of the result has the type both sides' columns widen to, so
//! `SELECT 2147483647 EXCEPT SELECT m` on a DECIMAL(10,2) `m` is a DECIMAL(12,2), and a
//! DECIMAL(20,6) is not cut down to the left's DECIMAL(10,2).
//!
//! DataFusion's SQL planner makes these a semi or anti join on every column, null-safe, whose
//! keys its type coercion casts to the common type, but whose output stays the left side's
//! columns in the left's types. This puts the left's columns in the keys' types above the join.
//! UNION is widened by DataFusion's own coercion.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, cast, col};
use datafusion::optimizer::AnalyzerRule;

use super::spark_casts::is_cast_conversion;

#[derive(Debug, Default)]
pub struct WidenSetOperationTypes;

impl AnalyzerRule for WidenSetOperationTypes {
    fn name(&self) -> &str {
        "widen_set_operation_types"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        let mut widened = false;
        plan.transform_up_with_subqueries(|plan| match plan {
            LogicalPlan::Join(join) if is_set_operation(&join) && narrower_left(&join) => {
                widened = true;
                widen(join).map(Transformed::yes)
            }
            plan if widened => plan.recompute_schema().map(Transformed::yes),
            plan => Ok(Transformed::no(plan)),
        })
        .map(|transformed| transformed.data)
    }
}

/// The join DataFusion's SQL planner makes of an EXCEPT (anti) or INTERSECT (semi): on every
/// column of both sides, in order, with NULL equal to NULL. A user's join has its condition in
/// `filter` until the optimizer extracts the keys.
pub(super) fn is_set_operation(join: &Join) -> bool {
    let (left, right) = (join.left.schema().columns(), join.right.schema().columns());
    matches!(join.join_type, JoinType::LeftAnti | JoinType::LeftSemi)
        && join.null_equality == NullEquality::NullEqualsNull
        && join.filter.is_none()
        && join.on.len() == left.len()
        && join.on.len() == right.len()
        && join.on.iter().zip(left.iter().zip(&right)).all(|((l, r), (lc, rc))| is_column(l, lc) && is_column(r, rc))
}

/// The operand and type of a cast: legacy mode's casts give NULL where they fail.
fn cast_parts(key: &Expr) -> Option<(&Expr, &DataType)> {
    match key {
        Expr::Cast(c) => Some((&c.expr, c.field.data_type())),
        Expr::TryCast(c) => Some((&c.expr, c.field.data_type())),
        _ => None,
    }
}

/// Whether `key` is `column`, perhaps cast to the type both sides share (through the
/// conversion a Spark cast may run through).
fn is_column(key: &Expr, column: &Column) -> bool {
    match (cast_parts(key), key) {
        (Some((operand, _)), _) => is_column(operand, column),
        (None, Expr::ScalarFunction(f)) if is_cast_conversion(f.name()) && f.args.len() == 1 => {
            is_column(&f.args[0], column)
        }
        (None, _) => key.try_as_col() == Some(column),
    }
}

/// Whether a left column's key is cast: the shared type is not the left's.
fn narrower_left(join: &Join) -> bool {
    join.on.iter().any(|(left, _)| cast_parts(left).is_some())
}

/// `join` with its output as its cast keys, the very casts the two sides are compared in.
fn widen(join: Join) -> Result<LogicalPlan> {
    let keys: Vec<Option<Expr>> = join.on.iter().map(|(key, _)| cast_parts(key).map(|_| key.clone())).collect();
    project_with(LogicalPlan::Join(join), |i, _| keys[i].clone())
}

/// `plan` under a projection of all its columns, each with its name, the ones `types` gives a
/// type cast to it.
pub(super) fn project_cast(plan: LogicalPlan, types: &[Option<DataType>]) -> Result<LogicalPlan> {
    project_with(plan, |i, column| types[i].clone().map(|to| cast(column, to)))
}

/// `plan` under a projection of all its columns, each with its name: column `i` as `column(i,
/// the column)` gives it, or as it is.
fn project_with(plan: LogicalPlan, column: impl Fn(usize, Expr) -> Option<Expr>) -> Result<LogicalPlan> {
    let columns: Vec<Expr> = plan
        .schema()
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let plain = col(Column::new(qualifier.cloned(), field.name()));
            match column(i, plain.clone()) {
                Some(expr) => expr.alias_qualified(qualifier.cloned(), field.name()),
                None => plain,
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(columns)?.build()
}
