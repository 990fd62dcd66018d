//! Spark's `NormalizeNaNAndZero` (`NormalizeFloatingNumbers.scala`). Spark compares doubles with
//! `SQLOrderingUtil`, where every NaN is one value, equal to itself and above every number, and
//! -0.0 equals 0.0. Arrow compares them in IEEE 754's total order, where a NaN with its sign bit
//! set is below every number, and such a NaN is what the processor makes of `inf * 0`,
//! `inf - inf` or `-x` of a NaN; and Arrow hashes -0.0 and 0.0 apart. So, as Spark does:
//! - a FLOAT or DOUBLE grouping key, join key, window partition key, or DISTINCT column (of a
//!   DISTINCT aggregate, or of SELECT DISTINCT) is made the one NaN, and 0.0 for -0.0, before it
//!   is hashed or compared:
//!   NaN and -NaN form one group, -0.0 and 0.0 another, whose key is 0.0;
//! - a computed FLOAT or DOUBLE compared in a condition is normalised the same way, and its NaN
//!   made the one NaN where `greatest` or `least` compares it, or an array, struct or map the
//!   query builds holds it (for `sort_array`, `array_max` and the like to compare);
//! - a NaN a projection, an aggregate's argument or a sort key computes is made the one NaN (a
//!   -0.0 stays), as Spark's rows hold only that NaN: a -NaN sorts above every number.
//!
//! Where we differ: columns and literals (cast or not) are compared and sorted as they are, so
//! that filters on them still prune files and row groups and a table's sort order still serves:
//! a column holding a NaN with its sign bit set (stored from such a computation) compares and
//! sorts below every number. GROUPING SETS keys are not normalised (see
//! `docs/spark-differences.md`). EXPLAIN shows the normalisation where Spark's does, on keys.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::error::Result;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Distinct, Expr, ExprSchemable, LogicalPlan, Operator, Projection, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule::{is_comparison, map_expressions_keeping_names, rewrite_expressions};
use crate::exec::columnar::{input_column, shaped_like};

#[derive(Debug, Default)]
pub struct NormalizeNaNAndZero;

impl AnalyzerRule for NormalizeNaNAndZero {
    fn name(&self) -> &str {
        NORMALIZE_NAN_AND_ZERO
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = rewrite_expressions(plan, normalized_comparison)?;
        plan.transform_up_with_subqueries(normalized_keys).map(|plan| plan.data)
    }
}

/// The names of the functions that normalise a FLOAT or DOUBLE: a key's NaN and -0.0, a
/// computed value's NaN.
pub const NORMALIZE_NAN_AND_ZERO: &str = "normalize_nan_and_zero";
pub const NORMALIZE_NAN: &str = "normalize_nan";

/// One plan node with its FLOAT and DOUBLE keys normalised (an aggregate's grouping keys and
/// DISTINCT arguments, a join's keys, the columns under a DISTINCT) and the NaNs it computes
/// made the one NaN (a projection's values, an aggregate's arguments, a sort's keys).
fn normalized_keys(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let schema = merge_schema(&plan.inputs());
    let floating = |e: &Expr| e.get_type(&schema).is_ok_and(|t| t.is_floating());
    let computed = |e: &Expr| !is_stored(e) && floating(e);
    let key = |e: Expr| NORMALIZE.call(vec![e]);
    let value = |e: Expr| match e {
        Expr::Alias(alias) if computed(&alias.expr) => {
            NORMALIZE_NAN_ONLY.call(vec![*alias.expr]).alias_qualified(alias.relation, alias.name)
        }
        e if computed(&e) => NORMALIZE_NAN_ONLY.call(vec![e]),
        e => e,
    };
    match plan {
        LogicalPlan::Aggregate(_) => map_expressions_keeping_names(plan, |expr| match expr {
            Expr::AggregateFunction(mut aggregate) => {
                // `collect_set` keeps distinct values, as a DISTINCT aggregate does.
                let distinct = aggregate.params.distinct || aggregate.func.name() == "collect_set";
                let normalizes = |arg: &Expr| if distinct { floating(arg) } else { computed(arg) };
                if !aggregate.params.args.iter().any(normalizes) {
                    return Ok(Transformed::no(Expr::AggregateFunction(aggregate)));
                }
                let args = std::mem::take(&mut aggregate.params.args);
                aggregate.params.args = args
                    .into_iter()
                    .map(|arg| match distinct && floating(&arg) {
                        true => key(arg),
                        false => value(arg),
                    })
                    .collect();
                Ok(Transformed::yes(Expr::AggregateFunction(aggregate)))
            }
            Expr::GroupingSet(_) => Ok(Transformed::no(expr)),
            group_key if floating(&group_key) => Ok(Transformed::yes(key(group_key))),
            other => Ok(Transformed::no(other)),
        }),
        // Keys and, before they are taken out of it, the equalities of the join's condition.
        LogicalPlan::Join(_) => map_expressions_keeping_names(plan, |expr| match expr {
            join_key if floating(&join_key) => Ok(Transformed::yes(key(join_key))),
            condition => condition.transform_up(|e| match e {
                Expr::BinaryExpr(BinaryExpr { left, op: op @ (Operator::Eq | Operator::IsNotDistinctFrom), right })
                    if floating(&left) && floating(&right) =>
                {
                    let (left, right) = (Box::new(key(*left)), Box::new(key(*right)));
                    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr { left, op, right })))
                }
                other => Ok(Transformed::no(other)),
            }),
        }),
        // A window function's FLOAT and DOUBLE partition keys.
        LogicalPlan::Window(_) => map_expressions_keeping_names(plan, |expr| match expr {
            Expr::WindowFunction(mut window) if window.params.partition_by.iter().any(&floating) => {
                let keys = std::mem::take(&mut window.params.partition_by);
                window.params.partition_by = keys.into_iter().map(|k| if floating(&k) { key(k) } else { k }).collect();
                Ok(Transformed::yes(Expr::WindowFunction(window)))
            }
            other => Ok(Transformed::no(other)),
        }),
        LogicalPlan::Projection(_) | LogicalPlan::Sort(_) => {
            map_expressions_keeping_names(plan, |expr| match computed(&expr) {
                true => Ok(Transformed::yes(value(expr))),
                false => Ok(Transformed::no(expr)),
            })
        }
        LogicalPlan::Distinct(Distinct::All(input))
            if input.schema().fields().iter().any(|f| f.data_type().is_floating()) =>
        {
            let columns = input
                .schema()
                .iter()
                .map(|(qualifier, field)| {
                    let column = Expr::Column(Column::from((qualifier, field)));
                    match field.data_type().is_floating() {
                        true => key(column).alias_qualified(qualifier.cloned(), field.name()),
                        false => column,
                    }
                })
                .collect::<Vec<_>>();
            let projection = Projection::try_new(columns, input)?;
            Ok(Transformed::yes(LogicalPlan::Distinct(Distinct::All(Arc::new(LogicalPlan::Projection(projection))))))
        }
        other => Ok(Transformed::no(other)),
    }
}

fn normalized_comparison(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let computed_float = |e: &Expr| !is_stored(e) && e.get_type(schema).is_ok_and(|t| t.is_floating());
    // `greatest` and `least` compare their arguments too, and an array, struct or map a query
    // builds holds its values for functions that compare them (`sort_array`, `array_max`): a
    // computed -NaN is NaN, the largest.
    if let Expr::ScalarFunction(mut function) = expr {
        if !NAN_HOLDING.contains(&function.name()) || !function.args.iter().any(computed_float) {
            return Ok(Transformed::no(Expr::ScalarFunction(function)));
        }
        for arg in &mut function.args {
            if computed_float(arg) {
                *arg = NORMALIZE_NAN_ONLY.call(vec![arg.clone()]);
            }
        }
        return Ok(Transformed::yes(Expr::ScalarFunction(function)));
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else { return Ok(Transformed::no(expr)) };
    if !is_comparison(op) || !(computed_float(&left) || computed_float(&right)) {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })));
    }
    let normalized = |e: Box<Expr>| match computed_float(&e) {
        true => Box::new(NORMALIZE.call(vec![*e])),
        false => e,
    };
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: normalized(left), op, right: normalized(right) })))
}

/// The functions whose FLOAT and DOUBLE arguments, where computed, are made the one NaN.
const NAN_HOLDING: [&str; 5] = ["greatest", "least", "array", "make_array", "named_struct"];

/// A column or literal, perhaps cast: a value no arithmetic made.
fn is_stored(e: &Expr) -> bool {
    match e {
        Expr::Column(_) | Expr::Literal(..) => true,
        Expr::Alias(alias) => is_stored(&alias.expr),
        Expr::Cast(cast) => is_stored(&cast.expr),
        Expr::TryCast(cast) => is_stored(&cast.expr),
        _ => false,
    }
}

static NORMALIZE: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| Normalize::udf(true));

static NORMALIZE_NAN_ONLY: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| Normalize::udf(false));

/// Makes every NaN the one NaN and, with `zero`, -0.0 0.0.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Normalize {
    signature: Signature,
    zero: bool,
}

impl Normalize {
    fn udf(zero: bool) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(Normalize { signature: Signature::any(1, Volatility::Immutable), zero }))
    }
}

impl ScalarUDFImpl for Normalize {
    fn name(&self) -> &str {
        if self.zero { NORMALIZE_NAN_AND_ZERO } else { NORMALIZE_NAN }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let value = input_column(&args.args[0])?;
        // Adding 0.0 makes -0.0 0.0 and keeps every other number.
        let zero = if self.zero { 0.0 } else { -0.0 };
        let normalized: Arc<dyn Array> = match value.data_type() {
            DataType::Float64 => Arc::new(
                value
                    .as_primitive::<Float64Type>()
                    .unary::<_, Float64Type>(|x| if x.is_nan() { f64::NAN } else { x + zero }),
            ),
            DataType::Float32 => Arc::new(
                value
                    .as_primitive::<Float32Type>()
                    .unary::<_, Float32Type>(|x| if x.is_nan() { f32::NAN } else { x + zero as f32 }),
            ),
            _ => value,
        };
        shaped_like(&args.args[0], normalized)
    }
}

#[cfg(test)]
mod tests {
    /// `x + 0.0` makes -0.0 0.0, `x + -0.0` keeps it, and both keep every other number.
    #[test]
    fn adding_zero_makes_negative_zero_positive() {
        assert!((-0.0f64 + 0.0).is_sign_positive());
        assert!((-0.0f64 + -0.0).is_sign_negative() && (0.0f64 + -0.0).is_sign_positive());
        assert_eq!(-2.5f64 + 0.0, -2.5);
        assert_eq!(-2.5f64 + -0.0, -2.5);
        assert!((-f64::NAN).is_sign_negative() && f64::NAN.is_sign_positive());
    }
}
