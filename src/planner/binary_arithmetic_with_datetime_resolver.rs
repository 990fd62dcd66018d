//! Spark's `BinaryArithmeticWithDatetimeResolver`, for a DATE and a number of days: `d + n`
//! and `n + d` are `date_add(d, n)`, `d - n` is `date_sub(d, n)`. The number must be an INT,
//! SMALLINT or TINYINT; a BIGINT fails with DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE (42K09),
//! as in Spark. DataFusion's planner refuses a DECIMAL or DOUBLE number of days, and `n - d`,
//! before this rule runs, with its own message (42804, 42000).
//!
//! DataFusion's type coercion reads `d + n` as `d + INTERVAL n DAYS` instead: it takes a BIGINT
//! and steps each row through the calendar, where `date_add` adds integers (EXPLAIN prints
//! `date_add(d#1, 1)`, as Spark's does). Runs before that coercion. The rule's other cases
//! (intervals, timestamps, strings, two dates) are left to it.
//!
//! Where we differ: the column of `SELECT d + 1` is named after its text, `d + 1`, where Spark
//! names it `date_add(d, 1)`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;
use datafusion_spark::function::datetime::{date_add, date_sub};

use super::expression_rule::rewrite_expressions;
use crate::catalog::types::SparkType;
use crate::error::SqlError;

#[derive(Debug, Default)]
pub struct BinaryArithmeticWithDatetimeResolver;

impl AnalyzerRule for BinaryArithmeticWithDatetimeResolver {
    fn name(&self) -> &str {
        "binary_arithmetic_with_datetime_resolver"
    }

    fn analyze(&self, plan: LogicalPlan, _options: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, resolve)
    }
}

/// `expr` as Spark resolves it when it adds days to a DATE or takes them from one.
fn resolve(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op: op @ (Operator::Plus | Operator::Minus), right }) = &expr else {
        return Ok(Transformed::no(expr));
    };
    // An operand whose type is not known yet is left to type coercion, which reports it.
    let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema)) else {
        return Ok(Transformed::no(expr));
    };
    let (function, date, days, days_type) = match (op, &left_type, &right_type) {
        (Operator::Plus, DataType::Date32, days) if days.is_numeric() => (date_add(), left, right, days),
        (Operator::Plus, days, DataType::Date32) if days.is_numeric() => (date_add(), right, left, days),
        (Operator::Minus, DataType::Date32, days) if days.is_numeric() => (date_sub(), left, right, days),
        _ => return Ok(Transformed::no(expr)),
    };
    if !matches!(days_type, DataType::Int32 | DataType::Int16 | DataType::Int8) {
        return Err(unexpected_days(function.name(), date, days, days_type));
    }
    let call = ScalarFunction::new_udf(function, vec![date.as_ref().clone(), days.as_ref().clone()]);
    Ok(Transformed::yes(Expr::ScalarFunction(call)))
}

/// Spark's error for `function(date, days)` where `days` is of type `found`.
fn unexpected_days(function: &str, date: &Expr, days: &Expr, found: &DataType) -> DataFusionError {
    let found = SparkType::from_arrow(found).map_or_else(|_| found.to_string(), |t| t.ddl_name());
    let (date, days) = (date.human_display(), days.human_display());
    DataFusionError::from(SqlError::new(
        "42K09",
        format!(
            "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve \"{function}({date}, {days})\" due to data type \
             mismatch: The second parameter requires the (\"INT\" or \"SMALLINT\" or \"TINYINT\") type, however \
             \"{days}\" has the type \"{found}\"."
        ),
    ))
}
