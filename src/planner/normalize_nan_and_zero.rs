//! Spark's `NormalizeNaNAndZero` (`NormalizeFloatingNumbers.scala`) for comparisons: Spark
//! compares doubles with `SQLOrderingUtil`, where every NaN is one value, equal to itself and
//! above every number. Arrow compares them in IEEE 754's total order, where a NaN with its
//! sign bit set is below every number, and such a NaN is what the processor makes of
//! `inf * 0`, `inf - inf` or `-x` of a NaN. So a computed FLOAT or DOUBLE compared in a
//! condition is made the one NaN first (and -0.0 made 0.0).
//!
//! Where we differ: columns and literals (cast or not) are compared as they are, so that filters on them
//! still prune files and row groups; a column holding a NaN with its sign bit set (stored from
//! such a computation) compares below every number. Grouping, joins and sorting are not
//! normalised (see `docs/spark-differences.md`).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule::rewrite_expressions;
use super::infer_filters_from_constraints::is_comparison;
use crate::exec::columnar::shaped_like;

#[derive(Debug, Default)]
pub struct NormalizeNaNAndZero;

impl AnalyzerRule for NormalizeNaNAndZero {
    fn name(&self) -> &str {
        "normalize_nan_and_zero"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, normalized_comparison)
    }
}

fn normalized_comparison(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else { return Ok(Transformed::no(expr)) };
    let computed_float = |e: &Expr| !is_stored(e) && e.get_type(schema).is_ok_and(|t| t.is_floating());
    if !is_comparison(op) || !(computed_float(&left) || computed_float(&right)) {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })));
    }
    let normalized = |e: Box<Expr>| match computed_float(&e) {
        true => Box::new(NORMALIZE.call(vec![*e])),
        false => e,
    };
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: normalized(left), op, right: normalized(right) })))
}

/// A column or literal, perhaps cast: a value no arithmetic made.
fn is_stored(e: &Expr) -> bool {
    match e {
        Expr::Column(_) | Expr::Literal(..) => true,
        Expr::Cast(cast) => is_stored(&cast.expr),
        Expr::TryCast(cast) => is_stored(&cast.expr),
        _ => false,
    }
}

static NORMALIZE: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(Normalize { signature: Signature::any(1, Volatility::Immutable) }))
});

#[derive(Debug, PartialEq, Eq, Hash)]
struct Normalize {
    signature: Signature,
}

impl ScalarUDFImpl for Normalize {
    fn name(&self) -> &str {
        "normalize_nan_and_zero"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = args.args[0].to_array(args.number_rows)?;
        let normalized: Arc<dyn Array> = match value.data_type() {
            DataType::Float64 => Arc::new(
                value
                    .as_primitive::<Float64Type>()
                    .unary::<_, Float64Type>(|x| if x.is_nan() { f64::NAN } else { x + 0.0 }),
            ),
            DataType::Float32 => Arc::new(
                value
                    .as_primitive::<Float32Type>()
                    .unary::<_, Float32Type>(|x| if x.is_nan() { f32::NAN } else { x + 0.0 }),
            ),
            _ => value,
        };
        shaped_like(&args.args[0], normalized)
    }
}

#[cfg(test)]
mod tests {
    /// `x + 0.0` makes -0.0 0.0 and keeps every other number.
    #[test]
    fn adding_zero_makes_negative_zero_positive() {
        assert!((-0.0f64 + 0.0).is_sign_positive());
        assert_eq!(-2.5f64 + 0.0, -2.5);
        assert!((-f64::NAN).is_sign_negative() && f64::NAN.is_sign_positive());
    }
}
