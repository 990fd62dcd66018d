//! DataFusion's `PushDownFilter`, with a condition's conjuncts left in the order written when
//! one of them can fail. The rule sorts a filter's conjuncts: column-to-literal comparisons
//! last (`simplify_predicates`), then those it takes for cheap (comparisons, casts, `CASE`,
//! `IN`) ahead of the rest, function calls among them, as our ANSI arithmetic is
//! (`reorder_predicates`). Spark evaluates `AND` left to right and stops at the first false
//! (as `ShortCircuitEvaluation` makes ours), so a conjunct guards those after it:
//! `WHERE s RLIKE '^[0-9]+$' AND CAST(s AS INT) > 0` casts only digits, and `WHERE 10 / id > 1
//! AND id > 1` divides by zero where `id` is 0.
//!
//! So while the rule runs on such a filter, each conjunct is wrapped in a call it takes for
//! expensive and cannot simplify, which keeps the order; the wraps come off as soon as it
//! returns, wherever it moved the conjuncts (below projections and joins, into scans). A
//! condition no conjunct of which can fail is sorted as DataFusion sorts it: the order changes
//! no answer there.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::utils::{conjunction, split_conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, Filter, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::push_down_filter::PushDownFilter;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::infer_filters_from_constraints::widens;
use super::normalize_nan_and_zero::{NORMALIZE_NAN, NORMALIZE_NAN_AND_ZERO};
use super::overridden_rule::{Overridden, Rewrite, Rewritten};

/// DataFusion's `PushDownFilter`, keeping the written order of conjuncts that can fail.
pub type KeepConjunctOrder = Overridden<PushDownFilter, WrittenOrder>;

#[derive(Debug, Default)]
pub struct WrittenOrder;

impl Rewrite for WrittenOrder {
    fn rewrite(&self, rule: &dyn OptimizerRule, plan: LogicalPlan, config: &dyn OptimizerConfig) -> Rewritten {
        let LogicalPlan::Filter(filter) = plan else { return rule.rewrite(plan, config) };
        let conjuncts = split_conjunction(&filter.predicate);
        let schema = filter.input.schema();
        if conjuncts.len() < 2 || !conjuncts.iter().any(|conjunct| may_fail(conjunct, schema)) {
            return rule.rewrite(LogicalPlan::Filter(filter), config);
        }
        let wrapped: Vec<Expr> = split_conjunction_owned(filter.predicate).into_iter().map(in_order).collect();
        let predicate = conjunction(wrapped).expect("two conjuncts or more");
        let rewritten = rule.rewrite(LogicalPlan::Filter(Filter::try_new(predicate, filter.input)?), config)?;
        let transformed = rewritten.transformed;
        let unwrapped = rewritten.data.transform_down_with_subqueries(without_wraps)?.data;
        Ok(Transformed::new_transformed(unwrapped, transformed))
    }
}

/// The identity on booleans, opaque to the rule.
#[derive(Debug, PartialEq, Eq, Hash)]
struct InWrittenOrder {
    signature: Signature,
}

static IN_WRITTEN_ORDER: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(InWrittenOrder { signature: Signature::any(1, Volatility::Immutable) }))
});

impl ScalarUDFImpl for InWrittenOrder {
    fn name(&self) -> &str {
        "in_written_order"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Boolean))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(args.args.remove(0))
    }
}

fn in_order(conjunct: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&IN_WRITTEN_ORDER), vec![conjunct]))
}

/// `node` without the wraps in its expressions, and without a conjunct repeated in a filter or
/// a scan: one it merged with a filter under it, or pushed into a scan again, may hold a
/// conjunct twice, once wrapped.
fn without_wraps(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let node = node.map_expressions(|expr| {
        expr.transform_up(|e| match e {
            Expr::ScalarFunction(mut function) if function.func.name() == IN_WRITTEN_ORDER.name() => {
                Ok(Transformed::yes(function.args.remove(0)))
            }
            other => Ok(Transformed::no(other)),
        })
    })?;
    node.transform_data(|node| match node {
        LogicalPlan::Filter(filter) => {
            let conjuncts = distinct(split_conjunction_owned(filter.predicate.clone()));
            let predicate = conjunction(conjuncts).expect("a filter has a condition");
            if predicate == filter.predicate {
                return Ok(Transformed::no(LogicalPlan::Filter(filter)));
            }
            Ok(Transformed::yes(LogicalPlan::Filter(Filter::try_new(predicate, filter.input)?)))
        }
        LogicalPlan::TableScan(mut scan) => {
            let filters = distinct(scan.filters.clone());
            let changed = filters.len() < scan.filters.len();
            scan.filters = filters;
            Ok(Transformed::new_transformed(LogicalPlan::TableScan(scan), changed))
        }
        other => Ok(Transformed::no(other)),
    })
}

/// `exprs` without repeats, in their order.
fn distinct(exprs: Vec<Expr>) -> Vec<Expr> {
    let mut kept: Vec<Expr> = Vec::with_capacity(exprs.len());
    for expr in exprs {
        if !kept.contains(&expr) {
            kept.push(expr);
        }
    }
    kept
}

/// Whether evaluating `expr` may raise an error: arithmetic, casts that narrow or parse, and
/// function calls (our ANSI arithmetic among them), but for a few that cannot.
fn may_fail(expr: &Expr, schema: &DFSchema) -> bool {
    expr.exists(|node| Ok(node_may_fail(node, schema))).unwrap_or(true)
}

fn node_may_fail(node: &Expr, schema: &DFSchema) -> bool {
    match node {
        Expr::Column(_)
        | Expr::Literal(..)
        | Expr::Alias(_)
        | Expr::Not(_)
        | Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsUnknown(_)
        | Expr::IsNotTrue(_)
        | Expr::IsNotFalse(_)
        | Expr::IsNotUnknown(_)
        | Expr::Like(_)
        | Expr::SimilarTo(_)
        | Expr::Between(_)
        | Expr::InList(_)
        | Expr::Case(_)
        | Expr::TryCast(_)
        | Expr::Exists(_)
        | Expr::InSubquery(_) => false,
        Expr::BinaryExpr(BinaryExpr { op, .. }) => op.is_numerical_operators(),
        Expr::Cast(cast) => {
            let to = cast.field.data_type();
            let to_text = matches!(to, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
            !to_text && !cast.expr.get_type(schema).is_ok_and(|from| widens(&from, to))
        }
        Expr::ScalarFunction(function) => !CANNOT_FAIL.contains(&function.name()),
        _ => true,
    }
}

/// Functions that return a value for every input.
const CANNOT_FAIL: &[&str] = &[
    NORMALIZE_NAN_AND_ZERO,
    NORMALIZE_NAN,
    "isnan",
    "coalesce",
    "nvl",
    "lower",
    "upper",
    "trim",
    "btrim",
    "ltrim",
    "rtrim",
    "length",
    "character_length",
    "starts_with",
    "ends_with",
    "contains",
];

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{cast, col, lit};
    use datafusion::prelude::length;

    fn schema() -> DFSchema {
        let fields = vec![Field::new("i", DataType::Int32, true), Field::new("s", DataType::Utf8, true)];
        DFSchema::try_from(Schema::new(fields)).unwrap()
    }

    #[test]
    fn comparisons_widening_casts_and_listed_functions_cannot_fail() {
        let schema = schema();
        assert!(!may_fail(&col("i").gt(lit(1)).and(col("s").like(lit("a%"))), &schema));
        assert!(!may_fail(&cast(col("i"), DataType::Int64).eq(lit(5i64)), &schema));
        assert!(!may_fail(&length(col("s")).gt(lit(0)), &schema));
        assert!(!may_fail(&cast(col("i"), DataType::Utf8).eq(lit("5")), &schema));
    }

    #[test]
    fn arithmetic_parsing_narrowing_and_other_functions_may_fail() {
        let schema = schema();
        assert!(may_fail(&(lit(10) / col("i")).gt(lit(1)), &schema));
        assert!(may_fail(&cast(col("s"), DataType::Int32).gt(lit(0)), &schema));
        assert!(may_fail(&cast(col("i"), DataType::Int8).gt(lit(0)), &schema));
    }
}
