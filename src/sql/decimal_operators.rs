//! Spark's `DecimalPrecision` for a DECIMAL `*` or `/` that DataFusion cannot type. DataFusion's
//! SQL planner types each expression as it builds it, and its DECIMAL product keeps both
//! scales (its quotient adds to the scale), so operands whose scales add up past 38 fail the
//! statement (`CAST(1 AS DECIMAL(31,29)) * CAST(2 AS DECIMAL(23,13))`,
//! `3 / CAST(7 AS DECIMAL(38,37))`), where Spark gives up scale. Such an operator becomes
//! Spark's own function as it is planned, typed as Spark types it
//! ([`decimal_product`], [`decimal_division`]); every other operator is left to the analyzer's
//! rules, which do the same for a product whose operands only Spark's types make too wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::common::DFSchema;
use datafusion::error::Result;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{ExprSchemable, Operator};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::config::PrecisionLoss;
use crate::planner::ansi_arithmetic::decimal_product;
use crate::planner::decimal_division::decimal_division;

/// The planner, with the session's `spark.sql.decimalOperations.allowPrecisionLoss` (the
/// session sets it before planning each statement).
#[derive(Debug, Default)]
pub struct DecimalOperators {
    pub allow_precision_loss: Arc<AtomicBool>,
}

impl ExprPlanner for DecimalOperators {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> Result<PlannerResult<RawBinaryExpr>> {
        let op = match expr.op {
            BinaryOperator::Multiply => Operator::Multiply,
            BinaryOperator::Divide => Operator::Divide,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let (Ok(left), Ok(right)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
            return Ok(PlannerResult::Original(expr));
        };
        let number = |t: &datafusion::arrow::datatypes::DataType| t.is_decimal() || t.is_integer();
        let decimals = number(&left) && number(&right) && (left.is_decimal() || right.is_decimal());
        if !decimals || BinaryTypeCoercer::new(&left, &op, &right).get_result_type().is_ok() {
            return Ok(PlannerResult::Original(expr));
        }
        let loss = PrecisionLoss::when_allowed(self.allow_precision_loss.load(Ordering::Relaxed));
        let planned = match op {
            Operator::Divide => decimal_division(&expr.left, &expr.right, schema, loss)?,
            _ => decimal_product(&expr.left, &expr.right, schema, loss)?,
        };
        Ok(match planned {
            Some(planned) => PlannerResult::Planned(planned),
            None => PlannerResult::Original(expr),
        })
    }
}
