//! Spark's `UnwrapCastInBinaryComparison` turns `cast(k as T) = literal` into `k = literal'`
//! only when the cast widens (`Cast.canUpCast`), so that the comparison reaches the scan. A
//! narrowing cast it keeps: `cast(k as int) = 5` on a BIGINT `k` fails for a `k` past INT's
//! range (ANSI) and `cast(d as int) = 5` holds for a DECIMAL `d` of 5.5, so neither is
//! `k = 5` — nor prunes buckets on `k`. DataFusion's expression simplifier unwraps those too,
//! and then answers differently. Its rule runs here with each non-widening cast in a comparison
//! with literals hidden behind [`HiddenCast`], which it cannot see through, and put back after.

use datafusion::arrow::compute::CastOptions;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::{Cast, InList, ScalarFunction, TryCast};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::simplify_expressions::SimplifyExpressions;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::expression_rule::is_comparison;
use super::expression_rule::map_expressions_keeping_names;
use super::infer_filters_from_constraints::widens;
use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `SimplifyExpressions`, keeping the casts Spark keeps.
pub type UnwrapCastInBinaryComparison = Overridden<SimplifyExpressions, WideningOnly>;

#[derive(Debug, Default)]
pub struct WideningOnly;

impl Rewrite for WideningOnly {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        // Only nodes with a cast are rewritten: saving the names of every node's expressions
        // took most of the planning time this rule's passes took.
        let hidden = plan.transform_up_with_subqueries(|plan| {
            if !any_expression(&plan, |expr| matches!(expr, Expr::Cast(_) | Expr::TryCast(_)))? {
                return Ok(Transformed::no(plan));
            }
            let schema = merge_schema(&plan.inputs());
            map_expressions_keeping_names(plan, |expr| expr.transform_up(|expr| hide_narrowing_casts(expr, &schema)))
        })?;
        let simplified = rule.rewrite(hidden.data, config)?;
        let transformed = hidden.transformed || simplified.transformed;
        if !hidden.transformed {
            return Ok(Transformed::new_transformed(simplified.data, transformed));
        }
        let shown = simplified.data.transform_up_with_subqueries(|plan| {
            if !any_expression(&plan, |expr| HiddenCast::of(expr).is_some())? {
                return Ok(Transformed::no(plan));
            }
            map_expressions_keeping_names(plan, |expr| expr.transform_up(show_hidden_cast))
        })?;
        Ok(Transformed::new_transformed(shown.data, transformed || shown.transformed))
    }
}

/// `expr` with its non-widening cast operands hidden, if it compares them with literals; also
/// under widening casts, which the simplifier unwraps first (`cast(cast(k as smallint) as int)`).
fn hide_narrowing_casts(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    fn hide(operand: Box<Expr>, schema: &DFSchema) -> Result<(Box<Expr>, bool)> {
        // A cast of a literal (`CAST(0 AS INT)`) is the literal's to fold.
        if operand.column_refs().is_empty() {
            return Ok((operand, false));
        }
        // Legacy mode's casts give NULL where they fail, and hide as well.
        let (expr, field, tolerant) = match *operand {
            Expr::Cast(Cast { expr, field }) => (expr, field, false),
            Expr::TryCast(TryCast { expr, field }) => (expr, field, true),
            operand => return Ok((Box::new(operand), false)),
        };
        if !tolerant && expr.get_type(schema).is_ok_and(|from| widens(&from, field.data_type())) {
            let (expr, hid) = hide(expr, schema)?;
            return Ok((Box::new(Expr::Cast(Cast { expr, field })), hid));
        }
        let hidden = ScalarUDF::new_from_impl(HiddenCast::new(field.data_type().clone(), tolerant));
        Ok((Box::new(hidden.call(vec![*expr])), true))
    }
    // Literals as written, which may still be casts of literals here.
    let is_literal = |e: &Expr| e.column_refs().is_empty() && !e.is_volatile();
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if is_comparison(op) && (is_literal(&left) || is_literal(&right)) =>
        {
            let ((left, hid_left), (right, hid_right)) = (hide(left, schema)?, hide(right, schema)?);
            Ok(Transformed::new_transformed(Expr::BinaryExpr(BinaryExpr { left, op, right }), hid_left || hid_right))
        }
        Expr::InList(InList { expr, list, negated }) if list.iter().all(is_literal) => {
            let (expr, hid) = hide(expr, schema)?;
            Ok(Transformed::new_transformed(Expr::InList(InList { expr, list, negated }), hid))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Whether an expression of `plan`'s own, or one within them, is one `found` looks for.
fn any_expression(plan: &LogicalPlan, found: impl Fn(&Expr) -> bool) -> Result<bool> {
    let mut any = false;
    plan.apply_expressions(|expr| {
        any = expr.exists(|expr| Ok(found(expr)))?;
        Ok(if any { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    Ok(any)
}

/// A hidden cast as the cast it is.
fn show_hidden_cast(expr: Expr) -> Result<Transformed<Expr>> {
    let hidden = HiddenCast::of(&expr).map(|hidden| (hidden.to.clone(), hidden.tolerant));
    match (expr, hidden) {
        (Expr::ScalarFunction(ScalarFunction { mut args, .. }), Some((to, tolerant))) => {
            let operand = Box::new(args.remove(0));
            Ok(Transformed::yes(match tolerant {
                true => Expr::TryCast(TryCast::new(operand, to)),
                false => Expr::Cast(Cast::new(operand, to)),
            }))
        }
        (expr, _) => Ok(Transformed::no(expr)),
    }
}

/// `CAST(x AS to)` (or `TRY_CAST`, when `tolerant`) as a function, which the simplifier leaves
/// whole. It casts as the cast does, should it ever run.
#[derive(Debug, PartialEq, Eq, Hash)]
struct HiddenCast {
    to: DataType,
    tolerant: bool,
    signature: Signature,
}

impl HiddenCast {
    fn new(to: DataType, tolerant: bool) -> Self {
        HiddenCast { to, tolerant, signature: Signature::any(1, Volatility::Immutable) }
    }

    /// The hidden cast `expr` is, if it is one.
    fn of(expr: &Expr) -> Option<&HiddenCast> {
        match expr {
            Expr::ScalarFunction(ScalarFunction { func, args }) if args.len() == 1 => func.inner().downcast_ref(),
            _ => None,
        }
    }
}

impl ScalarUDFImpl for HiddenCast {
    fn name(&self) -> &str {
        "cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = <[ColumnarValue; 1]>::try_from(args.args)
            .map_err(|_| DataFusionError::Plan("cast takes one argument".to_string()))?;
        value.cast_to(&self.to, Some(&CastOptions { safe: self.tolerant, ..Default::default() }))
    }
}
