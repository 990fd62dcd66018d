//! Spark's `range(end)` / `range(start, end[, step[, numPartitions]])` table function: its integer literal
//! arguments give the [`RangeTable`] it reads, one BIGINT column `id`. (DataFusion's own
//! `range` names its column `value`.)

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;

use crate::exec::range::RangeTable;

#[derive(Debug)]
pub struct SparkRange;

impl TableFunctionImpl for SparkRange {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let values =
            args.exprs().iter().enumerate().map(|(i, e)| integer_literal(e, i + 1)).collect::<Result<Vec<i64>>>()?;
        let (start, end, step, splits) = match values.as_slice() {
            [end] => (0, *end, 1, None),
            [start, end] => (*start, *end, 1, None),
            [start, end, step] => (*start, *end, *step, None),
            [start, end, step, splits] => (*start, *end, *step, Some(*splits)),
            _ => {
                return plan_err!(
                    "range takes 1 to 4 arguments: range(end) or range(start, end[, step[, numPartitions]])"
                );
            }
        };
        if step == 0 {
            return plan_err!("range: the step must not be 0");
        }
        let splits = match splits {
            Some(n) if n < 1 => return plan_err!("range: numPartitions must be positive, got {n}"),
            Some(n) => Some(n as u64),
            None => None,
        };
        Ok(Arc::new(RangeTable::new(start, end, step, splits)))
    }
}

fn integer_literal(expr: &Expr, position: usize) -> Result<i64> {
    let value = match expr {
        Expr::Literal(v, _) => v.clone(),
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(v, _) => v.arithmetic_negate()?,
            _ => return plan_err!("range: argument {position} must be an integer literal"),
        },
        Expr::Cast(cast) => match cast.expr.as_ref() {
            Expr::Literal(v, _) => v.cast_to(&DataType::Int64)?,
            _ => return plan_err!("range: argument {position} must be an integer literal"),
        },
        _ => return plan_err!("range: argument {position} must be an integer literal"),
    };
    match value.cast_to(&DataType::Int64)? {
        ScalarValue::Int64(Some(v)) if value.data_type().is_integer() => Ok(v),
        _ => plan_err!("range: argument {position} must be an integer, got {value}"),
    }
}
