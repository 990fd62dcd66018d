//! Spark's `ConstantFolding`, for the errors it raises. Spark evaluates each constant
//! expression while it optimizes a query, so a constant that fails (`make_date(2024, 13, 29)`,
//! `0.001 / floor(0.001)`) fails the query even when no row would reach it. A failing constant
//! inside a branch of a conditional expression (CASE, `coalesce`, `nvl`, `nvl2`, `ifnull`) is
//! left to the rows, as Spark leaves it, since the branch may never run; a CASE whose parts are
//! all constant is evaluated whole, which runs only the branch it takes. The operand of
//! `IS [NOT] NULL` is left too, as Spark's `NullPropagation` answers it first.
//!
//! DataFusion's simplifier folds constants too, but keeps one whose evaluation fails, and the
//! query then fails only if a row evaluates it. This rule evaluates and raises; the folding
//! itself stays DataFusion's. It runs last among the analyzer rules, once the expressions are
//! Spark's (ANSI arithmetic, division, casts), and before DataFusion's optimizer, which would
//! drop a projection over no rows with its constants. A function that must be simplified
//! before it runs is left alone. Where we differ: `coalesce` and its kin are
//! never evaluated whole, so a failing first argument fails only with a row, where Spark
//! evaluates it first.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{RecordBatch, new_null_array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{ColumnarValue, Expr, LogicalPlan, Volatility};
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_expr::create_physical_expr;

#[derive(Debug, Default)]
pub struct ConstantFolding;

impl AnalyzerRule for ConstantFolding {
    fn name(&self) -> &str {
        "constant_folding"
    }

    fn analyze(&self, plan: LogicalPlan, options: &ConfigOptions) -> Result<LogicalPlan> {
        let props = evaluation_props(options);
        plan.apply_with_subqueries(|node| {
            node.apply_expressions(|expr| {
                raise_failing_constants(expr, false, &props)?;
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(plan)
    }
}

/// Evaluates the largest constant parts of `expr`, and fails as the first that fails, unless
/// it lies in a branch of a conditional expression (`in_branch`).
fn raise_failing_constants(expr: &Expr, in_branch: bool, props: &ExecutionProps) -> Result<()> {
    let constant = is_constant(expr);
    if constant {
        return match evaluate(expr, props) {
            Err(e) if !in_branch && raised_by_a_value(&e) => Err(e),
            _ => Ok(()),
        };
    }
    let in_branch = in_branch || conditional(expr);
    expr.apply_children(|child| {
        raise_failing_constants(child, in_branch, props)?;
        Ok(TreeNodeRecursion::Continue)
    })
    .map(|_| ())
}

/// Whether `error` is one a value raises (Spark's errors, Arrow's, an evaluation's), rather than
/// one of a function that cannot be evaluated on its own, which stays for the rows.
fn raised_by_a_value(error: &DataFusionError) -> bool {
    matches!(error, DataFusionError::External(_) | DataFusionError::ArrowError(..) | DataFusionError::Execution(_))
}

/// Spark's `ConditionalExpression`s, as DataFusion has them; and `IS [NOT] NULL`, which
/// Spark's `NullPropagation` answers without evaluating an operand that cannot be NULL (a
/// function of non-NULL constants, mostly) before any constant is folded.
fn conditional(expr: &Expr) -> bool {
    match expr {
        Expr::Case(_) | Expr::IsNull(_) | Expr::IsNotNull(_) => true,
        Expr::ScalarFunction(function) => ["coalesce", "nvl", "nvl2", "ifnull"].contains(&function.name()),
        _ => false,
    }
}

/// Whether `expr` can be evaluated without a row, as DataFusion's `ConstEvaluator` decides it;
/// a literal needs no evaluating. Of the conditionals only CASE is evaluated whole: its
/// physical form runs only the branch it takes.
pub(super) fn is_constant(expr: &Expr) -> bool {
    !matches!(expr, Expr::Literal(..))
        && !expr
            .exists(|e| {
                Ok(match e {
                    Expr::ScalarFunction(function) => {
                        function.func.signature().volatility == Volatility::Volatile || conditional(e)
                    }
                    Expr::IsNull(_) | Expr::IsNotNull(_) => true,
                    #[expect(deprecated)]
                    Expr::AggregateFunction(_)
                    | Expr::ScalarVariable(..)
                    | Expr::Column(_)
                    | Expr::OuterReferenceColumn(..)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::SetComparison(_)
                    | Expr::ScalarSubquery(_)
                    | Expr::WindowFunction(_)
                    | Expr::GroupingSet(_)
                    | Expr::Wildcard { .. }
                    | Expr::Placeholder(_)
                    | Expr::Unnest(_)
                    | Expr::HigherOrderFunction(_)
                    | Expr::Lambda(_)
                    | Expr::LambdaVariable(_) => true,
                    _ => false,
                })
            })
            .unwrap_or(true)
}

/// One row without columns, for a constant to give one value.
static ONE_ROW: LazyLock<(DFSchema, RecordBatch)> = LazyLock::new(|| {
    let schema = Arc::new(Schema::new(vec![Field::new(".", DataType::Null, true)]));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![new_null_array(&DataType::Null, 1)])
        .expect("a null column of one row");
    (DFSchema::try_from(schema).expect("one field"), batch)
});

/// What a constant is evaluated with: the session's `options`, which Spark's functions read.
pub(super) fn evaluation_props(options: &ConfigOptions) -> ExecutionProps {
    let mut props = ExecutionProps::new();
    props.config_options = Some(Arc::new(options.clone()));
    props
}

/// `expr` evaluated on one row; `None` where it cannot be planned here.
fn evaluated(expr: &Expr, props: &ExecutionProps) -> Option<Result<ColumnarValue>> {
    let (schema, batch) = &*ONE_ROW;
    let physical = create_physical_expr(expr, schema, props, &PhysicalPlanningContext::default()).ok()?;
    Some(physical.evaluate(batch))
}

/// `expr`'s value; an expression that cannot be planned here is not evaluated.
fn evaluate(expr: &Expr, props: &ExecutionProps) -> Result<()> {
    evaluated(expr, props).map_or(Ok(()), |value| value.map(drop))
}

/// The value of a constant `expr`; `None` where it cannot be planned here or fails, which is
/// left to this rule and the rows.
pub(super) fn value(expr: &Expr, props: &ExecutionProps) -> Option<ScalarValue> {
    match evaluated(expr, props)?.ok()? {
        ColumnarValue::Scalar(value) => Some(value),
        ColumnarValue::Array(values) => ScalarValue::try_from_array(&values, 0).ok(),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{col, lit, when};
    use datafusion::prelude::{coalesce, nullif};

    use super::*;

    fn failing() -> Expr {
        // A cast of text that is not a number fails when evaluated.
        Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(lit("x")), DataType::Int32))
    }

    fn raised(expr: Expr) -> bool {
        raise_failing_constants(&expr, false, &ExecutionProps::new()).is_err()
    }

    #[test]
    fn a_failing_constant_fails_outside_conditional_branches_only() {
        assert!(raised(failing()));
        assert!(raised(col("a").eq(failing())), "beside a column");
        assert!(!raised(when(col("a").is_null(), failing()).otherwise(lit(1)).unwrap()), "in a branch");
        assert!(!raised(coalesce(vec![col("a"), failing()])), "in coalesce");
        assert!(!raised(when(lit(false), failing()).otherwise(lit(1)).unwrap()), "a CASE that never takes it");
        assert!(raised(when(lit(true), failing()).otherwise(lit(1)).unwrap()), "a CASE that takes it");
        assert!(!raised(nullif(lit(1), lit(2)) + lit(1)), "constants that evaluate");
        assert!(!raised(failing().is_not_null()), "answered without its operand");
    }
}
