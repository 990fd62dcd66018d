//! Spark's `InferFiltersFromConstraints`, in the part that shows in scans: a comparison that
//! is never true for NULL (`k = 42`, `d < '2026-01-02'`, `k + 1 = 6`) implies `isnotnull(k)`,
//! which Spark adds in front of it so that scans get `IsNotNull` pushed (`PushedFilters: [IsNotNull(k),
//! EqualTo(k,42)]`, `PartitionFilters: [isnotnull(d), (d = …)]`). `isnotnull(cast(k as
//! double))` and `isnotnull(k + 1)` are `isnotnull(k)`, as Spark infers them. A join's
//! condition does the same for the sides whose rows it may drop (both for inner joins, the
//! inner side of an outer join; not for semi and anti joins, which Spark makes of subqueries
//! after it infers): `k1.k < f.z` filters `isnotnull(k)` and `isnotnull(z)` under the join.
//! Spark infers more (equalities across joins); that does not change where rows move.
//!
//! Runs last among the logical rules, so that it sees filters already pushed into scans.

use super::ansi_arithmetic::{ANSI_NEGATE, ansi_binary};
use super::expression_rule::is_comparison;
use super::normalize_nan_and_zero::{NORMALIZE_NAN, NORMALIZE_NAN_AND_ZERO};
use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::JoinType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::error::Result;
use datafusion::logical_expr::utils::{conjunction, split_conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Filter, Join, LogicalPlan, Operator, Projection, SubqueryAlias, TableScan,
};
use datafusion::optimizer::push_down_filter::replace_cols_by_name;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct InferFiltersFromConstraints;

/// The columns a predicate is never true without (`scanNullIntolerantAttribute`): those it
/// reaches through operators that are NULL when an input is — comparisons, arithmetic,
/// casts, negation, and ANSI mode's checked arithmetic — so `cast(k as double) = 5.0` and
/// `k + 1 = 6` imply `isnotnull(k)`.
/// `<=>`, `IS NULL`, `AND`, `OR` and functions stop the search, as in Spark.
fn null_intolerant_columns(predicate: &Expr) -> Vec<&Expr> {
    fn scan<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
        match expr {
            Expr::Column(_) if !out.contains(&expr) => out.push(expr),
            Expr::Cast(cast) => scan(&cast.expr, out),
            Expr::Negative(inner) | Expr::Not(inner) => scan(inner, out),
            Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_null_intolerant(*op) => {
                scan(left, out);
                scan(right, out);
            }
            _ => {
                if let Some((op, left, right)) = ansi_binary(expr)
                    && is_null_intolerant(op)
                {
                    scan(left, out);
                    scan(right, out);
                } else if let Some(operand) = null_preserving_operand(expr) {
                    scan(operand, out);
                }
            }
        }
    }
    let mut columns = Vec::new();
    if matches!(predicate, Expr::BinaryExpr(BinaryExpr { op, .. }) if is_comparison(*op)) {
        scan(predicate, &mut columns);
    }
    columns
}

fn is_null_intolerant(op: Operator) -> bool {
    is_comparison(op) || op.is_numerical_operators()
}

/// `isnotnull(e)` implies the `isnotnull` of the columns `e` is NULL exactly when one of them is:
/// `e` built of arithmetic and casts between numbers over columns and literals. So
/// `isnotnull(k + 1)` and `isnotnull(cast(cast(j as int) as bigint))`, which DataFusion filters a
/// join on computed keys with, give `isnotnull(k)` and `isnotnull(j)`, as Spark infers them,
/// put in front. The predicate itself stays, since evaluating `e` may fail (a cast that does
/// not fit), unless `e` is a widening cast between numbers, which neither fails nor turns a
/// value into NULL: `isnotnull(cast(k as double))` is `isnotnull(k)`. Other expressions give
/// nothing: `cast(s as int)` of a string may be NULL where `s` is not.
fn simplify(expr: Expr, schema: &DFSchema) -> Vec<Expr> {
    let Expr::IsNotNull(mut inner) = expr else { return vec![expr] };
    // Normalising a float neither fails nor makes NULL: `isnotnull(normalize(k))` is `isnotnull(k)`.
    while let Expr::ScalarFunction(function) = inner.as_ref()
        && is_normalization(function.name())
        && let [operand] = function.args.as_slice()
    {
        inner = Box::new(operand.clone());
    }
    if let Expr::Cast(cast) = inner.as_ref()
        && matches!(cast.expr.as_ref(), Expr::Column(_))
        && cast.expr.get_type(schema).is_ok_and(|from| widens(&from, cast.field.data_type()))
    {
        return vec![Expr::IsNotNull(cast.expr.clone())];
    }
    let mut columns = Vec::new();
    if matches!(*inner, Expr::Column(_)) || !null_exactly_with(&inner, schema, &mut columns) {
        columns.clear();
    }
    columns.into_iter().map(|c| Expr::IsNotNull(Box::new(c))).chain([Expr::IsNotNull(inner)]).collect()
}

/// Whether `expr` is NULL exactly when one of its columns is (collected into `columns`).
fn null_exactly_with(expr: &Expr, schema: &DFSchema, columns: &mut Vec<Expr>) -> bool {
    let numeric = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_numeric());
    match expr {
        Expr::Column(_) => {
            if !columns.contains(expr) {
                columns.push(expr.clone());
            }
            true
        }
        Expr::Literal(value, _) => !value.is_null(),
        Expr::Cast(cast) => {
            numeric(&cast.expr) && cast.field.data_type().is_numeric() && null_exactly_with(&cast.expr, schema, columns)
        }
        Expr::Negative(inner) => null_exactly_with(inner, schema, columns),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            null_exactly_with_operands(*op, left, right, schema, columns)
        }
        _ => match null_preserving_operand(expr) {
            Some(operand) => null_exactly_with(operand, schema, columns),
            None => ansi_binary(expr)
                .is_some_and(|(op, left, right)| null_exactly_with_operands(op, left, right, schema, columns)),
        },
    }
}

/// The operand of a function that is NULL exactly when its operand is: ANSI mode's checked
/// negation, and the normalisation of floats.
fn null_preserving_operand(expr: &Expr) -> Option<&Expr> {
    let Expr::ScalarFunction(function) = expr else { return None };
    match function.args.as_slice() {
        [operand] if function.name() == ANSI_NEGATE || is_normalization(function.name()) => Some(operand),
        _ => None,
    }
}

fn is_normalization(name: &str) -> bool {
    name == NORMALIZE_NAN_AND_ZERO || name == NORMALIZE_NAN
}

/// Whether `left op right` is NULL exactly when one of its columns is.
fn null_exactly_with_operands(
    op: Operator,
    left: &Expr,
    right: &Expr,
    schema: &DFSchema,
    columns: &mut Vec<Expr>,
) -> bool {
    let numeric = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_numeric());
    op.is_numerical_operators()
        && numeric(left)
        && numeric(right)
        && null_exactly_with(left, schema, columns)
        && null_exactly_with(right, schema, columns)
}

/// Whether every value of `from` has a value of `to`.
pub(super) fn widens(from: &DataType, to: &DataType) -> bool {
    /// Decimal digits a type's values need before the point; `None` for non-integers.
    fn integer_digits(t: &DataType) -> Option<(u8, bool)> {
        Some(match t {
            DataType::Int8 => (3, true),
            DataType::Int16 => (5, true),
            DataType::Int32 => (10, true),
            DataType::Int64 => (19, true),
            DataType::UInt8 => (3, false),
            DataType::UInt16 => (5, false),
            DataType::UInt32 => (10, false),
            DataType::UInt64 => (20, false),
            _ => return None,
        })
    }
    let width = |t: &DataType| t.primitive_width();
    match (from, to) {
        _ if from == to => true,
        (_, DataType::Float64) => from.is_integer() || from == &DataType::Float32,
        (_, DataType::Float32) => from.is_integer(),
        (_, DataType::Decimal128(p, s)) => {
            integer_digits(from).is_some_and(|(digits, _)| i16::from(*p) - i16::from(*s) >= i16::from(digits))
        }
        _ if from.is_integer() && to.is_integer() => match (integer_digits(from), integer_digits(to)) {
            (Some((_, from_signed)), Some((_, to_signed))) => {
                (from_signed == to_signed && width(to) >= width(from))
                    || (!from_signed && to_signed && width(to) > width(from))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Adds `isnotnull(k)` for each predicate that is never true for a NULL `k`, unless already
/// there, all before the predicates.
fn infer(predicates: Vec<Expr>, schema: &DFSchema) -> (Vec<Expr>, bool) {
    // Spark puts the constraints it infers in front of the condition, together.
    let (mut not_null, mut rest): (Vec<Expr>, Vec<Expr>) = (Vec::new(), Vec::new());
    for original in &predicates {
        for predicate in simplify(original.clone(), schema) {
            for column in null_intolerant_columns(&predicate) {
                let inferred = Expr::IsNotNull(Box::new(column.clone()));
                if !not_null.contains(&inferred) {
                    not_null.push(inferred);
                }
            }
            match predicate {
                Expr::IsNotNull(ref inner) if matches!(inner.as_ref(), Expr::Column(_)) => {
                    if !not_null.contains(&predicate) {
                        not_null.push(predicate);
                    }
                }
                _ if rest.contains(&predicate) => {}
                _ => rest.push(predicate),
            }
        }
    }
    not_null.extend(rest);
    let changed = not_null != predicates;
    (not_null, changed)
}

impl OptimizerRule for InferFiltersFromConstraints {
    fn name(&self) -> &str {
        "infer_filters_from_constraints"
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        plan.transform_up(|node| match node {
            LogicalPlan::Filter(filter) => {
                let (predicates, changed) =
                    infer(split_conjunction_owned(filter.predicate.clone()), filter.input.schema());
                if !changed {
                    return Ok(Transformed::no(LogicalPlan::Filter(filter)));
                }
                let predicate = conjunction(predicates).expect("at least the original predicate");
                Ok(Transformed::yes(LogicalPlan::Filter(Filter::try_new(predicate, filter.input)?)))
            }
            LogicalPlan::TableScan(scan) => {
                let schema = DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?;
                let (filters, changed) = infer(scan.filters.clone(), &schema);
                if !changed {
                    return Ok(Transformed::no(LogicalPlan::TableScan(scan)));
                }
                Ok(Transformed::yes(LogicalPlan::TableScan(TableScan { filters, ..scan })))
            }
            LogicalPlan::Join(join) => filter_join_sides(join),
            other => Ok(Transformed::no(other)),
        })
    }
}

/// `isnotnull` of the columns a join's non-equi condition is never true without, added under
/// the join on each side whose unmatched rows the join drops.
fn filter_join_sides(join: Join) -> Result<Transformed<LogicalPlan>> {
    let (filter_left, filter_right) = match join.join_type {
        // Spark infers before subqueries become semi and anti joins (`RewritePredicateSubquery`).
        JoinType::LeftSemi | JoinType::LeftAnti => (false, false),
        JoinType::Inner | JoinType::RightSemi => (true, true),
        JoinType::Left | JoinType::LeftMark => (false, true),
        JoinType::Right | JoinType::RightAnti | JoinType::RightMark => (true, false),
        JoinType::Full => (false, false),
    };
    let columns: Vec<Expr> = join
        .filter
        .iter()
        .flat_map(|f| split_conjunction_owned(f.clone()))
        .flat_map(|p| null_intolerant_columns(&p).into_iter().cloned().collect::<Vec<_>>())
        .collect();
    let side_columns = |side: &LogicalPlan| -> Vec<Expr> {
        columns
            .iter()
            .filter(|c| matches!(c, Expr::Column(col) if side.schema().has_column(col)))
            .map(|c| Expr::IsNotNull(Box::new(c.clone())))
            .collect()
    };
    let (left_not_null, right_not_null) = (side_columns(&join.left), side_columns(&join.right));
    let mut changed = false;
    let mut join = join;
    if filter_left && !left_not_null.is_empty() {
        let side = with_predicates(join.left.as_ref().clone(), left_not_null)?;
        changed |= side.transformed;
        join.left = side.data.into();
    }
    if filter_right && !right_not_null.is_empty() {
        let side = with_predicates(join.right.as_ref().clone(), right_not_null)?;
        changed |= side.transformed;
        join.right = side.data.into();
    }
    Ok(Transformed::new_transformed(LogicalPlan::Join(join), changed))
}

/// `plan` filtered by `predicates` as well, each put in front of the filter and the scan under it
/// (where it becomes a pushed filter), unless already there. Through an alias, the predicates
/// are renamed to the columns under it; through a projection, to the expressions it computes,
/// as Spark pushes its inferred filters down, so that a filter the optimizer already pushed
/// below the projection is not repeated above it.
fn with_predicates(plan: LogicalPlan, predicates: Vec<Expr>) -> Result<Transformed<LogicalPlan>> {
    if let LogicalPlan::Projection(projection) = plan {
        if projection.expr.iter().any(Expr::is_volatile) {
            return with_predicates_here(LogicalPlan::Projection(projection), predicates);
        }
        let computed: HashMap<String, Expr> = projection
            .schema
            .iter()
            .zip(&projection.expr)
            .map(|((qualifier, field), expr)| (Column::from((qualifier, field)).flat_name(), expr.clone().unalias()))
            .collect();
        let renamed = predicates.into_iter().map(|p| replace_cols_by_name(p, &computed)).collect::<Result<Vec<_>>>()?;
        let input = with_predicates(projection.input.as_ref().clone(), renamed)?;
        return input.map_data(|input| {
            Ok(LogicalPlan::Projection(Projection::try_new_with_schema(
                projection.expr,
                input.into(),
                projection.schema,
            )?))
        });
    }
    if let LogicalPlan::Join(join) = plan {
        return through_join(join, predicates);
    }
    if let LogicalPlan::SubqueryAlias(alias) = plan {
        let (outer, inner) = (alias.schema.columns(), alias.input.schema().columns());
        let renamed = predicates
            .into_iter()
            .map(|p| {
                p.transform(|e| match e {
                    Expr::Column(c) => match outer.iter().position(|o| *o == c) {
                        Some(i) => Ok(Transformed::yes(Expr::Column(inner[i].clone()))),
                        None => Ok(Transformed::no(Expr::Column(c))),
                    },
                    other => Ok(Transformed::no(other)),
                })
                .map(|t| t.data)
            })
            .collect::<Result<Vec<_>>>()?;
        let input = with_predicates(alias.input.as_ref().clone(), renamed)?;
        return input
            .map_data(|input| Ok(LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(input.into(), alias.alias)?)));
    }
    with_predicates_here(plan, predicates)
}

/// A join filtered by `predicates`: each on the side that holds all its columns, where the join
/// keeps that side's rows as they are (both sides of an inner join, the outer side of an outer
/// join), the rest above the join.
fn through_join(join: Join, predicates: Vec<Expr>) -> Result<Transformed<LogicalPlan>> {
    let (into_left, into_right) = match join.join_type {
        JoinType::Inner => (true, true),
        JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => (true, false),
        JoinType::Right | JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => (false, true),
        JoinType::Full => (false, false),
    };
    let holds = |side: &LogicalPlan, predicate: &Expr| {
        predicate.column_refs().iter().all(|column| side.schema().has_column(column))
    };
    let (mut left, mut right, mut above) = (Vec::new(), Vec::new(), Vec::new());
    for predicate in predicates {
        if into_left && holds(&join.left, &predicate) {
            left.push(predicate);
        } else if into_right && holds(&join.right, &predicate) {
            right.push(predicate);
        } else {
            above.push(predicate);
        }
    }
    let mut changed = false;
    let mut side_with = |side: Arc<LogicalPlan>, predicates: Vec<Expr>| -> Result<Arc<LogicalPlan>> {
        if predicates.is_empty() {
            return Ok(side);
        }
        let filtered = with_predicates(side.as_ref().clone(), predicates)?;
        changed |= filtered.transformed;
        Ok(filtered.data.into())
    };
    let join = Join { left: side_with(join.left, left)?, right: side_with(join.right, right)?, ..join };
    let joined = if above.is_empty() {
        Transformed::no(LogicalPlan::Join(join))
    } else {
        with_predicates_here(LogicalPlan::Join(join), above)?
    };
    Ok(Transformed::new_transformed(joined.data, changed || joined.transformed))
}

fn with_predicates_here(plan: LogicalPlan, predicates: Vec<Expr>) -> Result<Transformed<LogicalPlan>> {
    let existing: Vec<Expr> = match &plan {
        LogicalPlan::Filter(filter) => split_conjunction(&filter.predicate).into_iter().cloned().collect(),
        _ => Vec::new(),
    };
    let new: Vec<Expr> = predicates.into_iter().filter(|p| !existing.contains(p)).collect();
    if new.is_empty() {
        return Ok(Transformed::no(plan));
    }
    let input = match plan {
        LogicalPlan::Filter(filter) => filter.input,
        other => other.into(),
    };
    let input = match input.as_ref() {
        LogicalPlan::TableScan(scan) => {
            let mut scan = scan.clone();
            let mut filters = new.clone();
            filters.extend(scan.filters.into_iter().filter(|f| !new.contains(f)));
            scan.filters = filters;
            LogicalPlan::TableScan(scan).into()
        }
        _ => input,
    };
    let predicate = conjunction(new.into_iter().chain(existing)).expect("at least one predicate");
    Ok(Transformed::yes(LogicalPlan::Filter(Filter::try_new(predicate, input)?)))
}
