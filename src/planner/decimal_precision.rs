//! Spark's `DecimalPrecision` rule, in the part where DataFusion decides the other way: in an
//! expression that mixes a DECIMAL with a FLOAT or DOUBLE (a comparison, arithmetic, `IN`,
//! `BETWEEN`), Spark casts the decimal to DOUBLE. DataFusion casts the double to
//! DECIMAL(30, 15) for comparisons, which fails on NaN and infinities and on any value past
//! 10^15 (`d > 1.5`, with `1.5` a decimal literal as Spark reads it, errors once a row holds
//! 1e20), and rounds away digits past the fifteenth. Runs just before DataFusion's type
//! coercion, which then finds nothing to decide.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule::rewrite_expressions;
use super::infer_filters_from_constraints::is_comparison;

#[derive(Debug, Default)]
pub struct DecimalPrecision;

impl AnalyzerRule for DecimalPrecision {
    fn name(&self) -> &str {
        "decimal_precision"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, doubles_over_decimals)
    }
}

/// Operators whose operands Spark brings to one type: comparisons and arithmetic.
fn is_binary_operator(op: Operator) -> bool {
    op.is_numerical_operators()
        || is_comparison(op)
        || matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
}

/// Whether some of `exprs` are floating point and some decimal.
fn mixes_decimal_and_float<'a>(exprs: impl IntoIterator<Item = &'a Expr>, schema: &DFSchema) -> bool {
    let types: Vec<DataType> = exprs.into_iter().filter_map(|e| e.get_type(schema).ok()).collect();
    types.iter().any(DataType::is_floating) && types.iter().any(DataType::is_decimal)
}

/// `expr` as DOUBLE if it is a decimal, unchanged otherwise.
fn decimal_as_double(expr: Expr, schema: &DFSchema) -> Result<Expr> {
    if expr.get_type(schema).is_ok_and(|t| t.is_decimal()) {
        expr.cast_to(&DataType::Float64, schema)
    } else {
        Ok(expr)
    }
}

fn doubles_over_decimals(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let double = |expr: Box<Expr>| decimal_as_double(*expr, schema).map(Box::new);
    Ok(match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if is_binary_operator(op) && mixes_decimal_and_float([left.as_ref(), right.as_ref()], schema) =>
        {
            Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: double(left)?, op, right: double(right)? }))
        }
        Expr::InList(InList { expr, list, negated })
            if mixes_decimal_and_float(std::iter::once(expr.as_ref()).chain(&list), schema) =>
        {
            let list = list.into_iter().map(|item| decimal_as_double(item, schema)).collect::<Result<_>>()?;
            Transformed::yes(Expr::InList(InList { expr: double(expr)?, list, negated }))
        }
        Expr::Between(Between { expr, negated, low, high })
            if mixes_decimal_and_float([expr.as_ref(), low.as_ref(), high.as_ref()], schema) =>
        {
            Transformed::yes(Expr::Between(Between {
                expr: double(expr)?,
                negated,
                low: double(low)?,
                high: double(high)?,
            }))
        }
        other => Transformed::no(other),
    })
}
