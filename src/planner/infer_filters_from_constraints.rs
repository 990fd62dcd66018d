//! Spark's `InferFiltersFromConstraints`, in the part that shows in scans: a comparison that
//! is never true for NULL (`k = 42`, `d < '2026-01-02'`, `k + 1 = 6`) implies `isnotnull(k)`,
//! which Spark adds in front of it so that scans get `IsNotNull` pushed (`PushedFilters: [IsNotNull(k),
//! EqualTo(k,42)]`, `PartitionFilters: [isnotnull(d), (d = …)]`). `isnotnull(cast(k as
//! double))` of a widening cast is `isnotnull(k)`, as Spark simplifies it. Spark infers more
//! (equalities across joins, `isnotnull` from a non-equi join's condition for each side);
//! those do not change where rows move.
//!
//! Runs last among the logical rules, so that it sees filters already pushed into scans.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, Filter, LogicalPlan, Operator, TableScan};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct InferFiltersFromConstraints;

/// The columns a predicate is never true without (`scanNullIntolerantAttribute`): those it
/// reaches through operators that are NULL when an input is — comparisons, arithmetic,
/// casts, negation — so `cast(k as double) = 5.0` and `k + 1 = 6` imply `isnotnull(k)`.
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
            _ => {}
        }
    }
    let mut columns = Vec::new();
    if matches!(predicate, Expr::BinaryExpr(BinaryExpr { op, .. }) if is_comparison(*op)) {
        scan(predicate, &mut columns);
    }
    columns
}

/// `=`, `<>`, `<`, `<=`, `>`, `>=`: NULL when either side is.
pub(super) fn is_comparison(op: Operator) -> bool {
    matches!(op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq)
}

fn is_null_intolerant(op: Operator) -> bool {
    is_comparison(op) || op.is_numerical_operators()
}

/// `isnotnull(cast(k))` → `isnotnull(k)` for widening casts between numbers, which neither
/// fail nor turn a value into NULL. Other casts keep their predicate: `cast(s as int)` of a
/// string may fail or be NULL where `s` is not.
fn simplify(expr: Expr, schema: &DFSchema) -> Expr {
    match expr {
        Expr::IsNotNull(inner) => match *inner {
            Expr::Cast(cast)
                if matches!(cast.expr.as_ref(), Expr::Column(_))
                    && cast.expr.get_type(schema).is_ok_and(|from| widens(&from, cast.field.data_type())) =>
            {
                Expr::IsNotNull(cast.expr)
            }
            other => Expr::IsNotNull(Box::new(other)),
        },
        other => other,
    }
}

/// Whether every value of `from` has a value of `to`.
fn widens(from: &DataType, to: &DataType) -> bool {
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

/// Adds `isnotnull(k)` before each predicate that is never true for a NULL `k`, unless
/// already there.
fn infer(predicates: Vec<Expr>, schema: &DFSchema) -> (Vec<Expr>, bool) {
    let mut out: Vec<Expr> = Vec::with_capacity(predicates.len() * 2);
    let mut changed = false;
    for predicate in predicates {
        let predicate = {
            let simplified = simplify(predicate.clone(), schema);
            changed |= simplified != predicate;
            simplified
        };
        for column in null_intolerant_columns(&predicate) {
            let not_null = Expr::IsNotNull(Box::new(column.clone()));
            if !out.contains(&not_null) {
                out.push(not_null);
                changed = true;
            }
        }
        if !out.contains(&predicate) {
            out.push(predicate);
        }
    }
    (out, changed)
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
            other => Ok(Transformed::no(other)),
        })
    }
}
