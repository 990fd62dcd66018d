//! Spark's `DecimalPrecision` rule, in the part where DataFusion decides the other way: in an
//! expression that mixes a DECIMAL with a FLOAT or DOUBLE (a comparison, arithmetic, `IN`,
//! `BETWEEN`), Spark casts the decimal to DOUBLE. DataFusion casts the double to
//! DECIMAL(30, 15) for comparisons, which fails on NaN and infinities and on any value past
//! 10^15 (`d > 1.5`, with `1.5` a decimal literal as Spark reads it, errors once a row holds
//! 1e20), and rounds away digits past the fifteenth. The same goes for the results of a CASE,
//! the arguments of `coalesce`, `greatest`, `least` and their kind, and the columns of a set
//! operation (Spark's `findWiderTypeForDecimal`). Where DECIMALs meet there or in a comparison
//! and need more than 38 digits, they meet in Spark 4's wider DECIMAL, which keeps the integral
//! digits; DataFusion's keeps the scale. An integer literal beside a DECIMAL in
//! `+ - * %`, their `try_` forms and `pmod` becomes the narrowest DECIMAL that holds it, as in Spark (the type
//! coercion that follows gives an integer column its type's DECIMAL, as Spark's does), so
//! `CAST(3 AS DECIMAL(12,2)) * 3` is a DECIMAL(14, 2); `pmod` of DECIMALs has Spark's remainder
//! type. With them goes `AnsiTypeCoercion`'s widening of a FLOAT beside an integer: both become
//! DOUBLEs, as an INT does not fit a FLOAT's 24 bits, where DataFusion computes in FLOAT. Runs
//! just before DataFusion's type coercion, which then finds nothing to decide.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::Result;
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::{Between, BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, Union};
use datafusion::optimizer::AnalyzerRule;

use super::ansi_arithmetic::products_past_datafusion_scales;
use super::decimal_division::{integer_decimal, integer_literal, wider_decimal};
use super::division::fractional_division;
use super::expression_rule::is_comparison;
use super::expression_rule::rewrite_expressions;
use super::widen_set_operation_types::{is_set_operation, project_cast};
use crate::config::{EvalMode, PrecisionLoss};

#[derive(Debug, Default)]
pub struct DecimalPrecision;

impl AnalyzerRule for DecimalPrecision {
    fn name(&self) -> &str {
        "decimal_precision"
    }

    /// Each expression once its operands are typed as Spark types them: `/` and `%` become
    /// Spark's division here, bottom up, so that a quotient is typed as Spark's before the
    /// expression holding it meets another type. The set operations' columns come last, from
    /// those types.
    fn analyze(&self, plan: LogicalPlan, options: &ConfigOptions) -> Result<LogicalPlan> {
        let (mode, loss) = (EvalMode::of(options), PrecisionLoss::of(options));
        let plan = rewrite_expressions(plan, |expr, schema| {
            doubles_over_decimals(expr, schema)?
                .transform_data(|expr| fractional_division(expr, schema, mode, loss))?
                .transform_data(|expr| products_past_datafusion_scales(expr, schema, loss))
        })?;
        Ok(plan.transform_up_with_subqueries(doubles_over_decimal_columns)?.data)
    }
}

/// A set operation's columns: a column some input has as DOUBLE and another as DECIMAL (or as
/// FLOAT and as an integer) is a DOUBLE in every input, and DECIMALs too wide to meet in 38
/// digits meet in Spark's wider DECIMAL (a UNION's inputs, the keys of EXCEPT's and
/// INTERSECT's join).
fn doubles_over_decimal_columns(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Union(union) => {
            let width = union.schema.fields().len();
            let meeting: Vec<Option<DataType>> = (0..width)
                .map(|i| {
                    let types: Vec<DataType> =
                        union.inputs.iter().map(|input| input.schema().field(i).data_type().clone()).collect();
                    meeting_type(&types)
                })
                .collect();
            if meeting.iter().all(Option::is_none) {
                return Ok(Transformed::no(LogicalPlan::Union(union)));
            }
            let inputs = union
                .inputs
                .into_iter()
                .map(|input| {
                    let casts: Vec<Option<DataType>> = input
                        .schema()
                        .fields()
                        .iter()
                        .zip(&meeting)
                        .map(|(field, meeting)| meeting.clone().filter(|to| is_cast_to(field.data_type(), to)))
                        .collect();
                    project_cast(Arc::unwrap_or_clone(input), &casts).map(Arc::new)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Transformed::yes(LogicalPlan::Union(Union::try_new_with_loose_types(inputs)?)))
        }
        LogicalPlan::Join(mut join) if is_set_operation(&join) => {
            let (left, right) = (Arc::clone(join.left.schema()), Arc::clone(join.right.schema()));
            let mut changed = false;
            for (l, r) in &mut join.on {
                if let Some(meeting) = meeting_type_of([&*l, &*r], &left.join(&right)?) {
                    *l = to_meeting_type(l.clone(), &meeting, &left)?;
                    *r = to_meeting_type(r.clone(), &meeting, &right)?;
                    changed = true;
                }
            }
            Ok(Transformed::new_transformed(LogicalPlan::Join(join), changed))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Operators whose operands Spark brings to one type: comparisons and arithmetic.
fn is_binary_operator(op: Operator) -> bool {
    op.is_numerical_operators()
        || is_comparison(op)
        || matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
}

/// Whether `exprs` meet as DOUBLEs, as `meeting_type` says.
fn needs_doubles<'a>(exprs: impl IntoIterator<Item = &'a Expr>, schema: &DFSchema) -> bool {
    meeting_type_of(exprs, schema) == Some(DataType::Float64)
}

/// The type `exprs` meet in where Spark's differs from DataFusion's, as `meeting_type` says.
fn meeting_type_of<'a>(exprs: impl IntoIterator<Item = &'a Expr>, schema: &DFSchema) -> Option<DataType> {
    let types: Vec<DataType> = exprs.into_iter().filter_map(|e| e.get_type(schema).ok()).collect();
    meeting_type(&types)
}

/// The type values of `types` meet in, decided here where Spark's differs from DataFusion's,
/// or where the type of a CASE or `coalesce` around them must be known before its own type
/// meets another (DataFusion types a CASE as its first branch until its coercion): DOUBLE where
/// some are floating point and some DECIMAL or integer; the widest of several integer types;
/// Spark's wider DECIMAL of DECIMALs and integers of several types.
fn meeting_type(types: &[DataType]) -> Option<DataType> {
    let any = |is: fn(&DataType) -> bool| types.iter().any(is);
    if any(DataType::is_floating) && any(|t| t.is_decimal() || t.is_integer()) {
        return Some(DataType::Float64);
    }
    let integers = types.iter().filter(|t| t.is_integer());
    if types.iter().all(|t| t.is_integer() || t.is_null()) && integers.clone().any(|t| t != &types[0]) {
        return integers.max_by_key(|t| t.primitive_width()).cloned();
    }
    wider_decimal(types)
}

/// Whether a value of `data_type` is cast where values meet in `meeting`.
fn is_cast_to(data_type: &DataType, meeting: &DataType) -> bool {
    match meeting {
        DataType::Float64 => becomes_double(data_type),
        meeting => data_type != meeting && (data_type.is_decimal() || data_type.is_integer()),
    }
}

/// `expr` in the type values meet in, if it is one of those cast there.
fn to_meeting_type(expr: Expr, meeting: &DataType, schema: &DFSchema) -> Result<Expr> {
    if expr.get_type(schema).is_ok_and(|t| is_cast_to(&t, meeting)) { expr.cast_to(meeting, schema) } else { Ok(expr) }
}

/// Whether a value of `data_type` becomes a DOUBLE where values meet as DOUBLEs.
fn becomes_double(data_type: &DataType) -> bool {
    data_type.is_decimal() || data_type.is_integer() || *data_type == DataType::Float32
}

/// Spark's `pmod` of DECIMALs (an integer made one as beside any DECIMAL) has its remainder's
/// type: the fewer integral digits of the two, and the larger scale.
fn decimal_pmod(mut function: ScalarFunction, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let types = decimal_operands(&function.args[0], &function.args[1], schema);
    let Some((l @ DataType::Decimal128(p1, s1), r @ DataType::Decimal128(p2, s2))) = types else {
        return Ok(Transformed::no(Expr::ScalarFunction(function)));
    };
    let scale = s1.max(s2);
    let integral = (i16::from(p1) - i16::from(s1)).min(i16::from(p2) - i16::from(s2));
    let precision = (integral + i16::from(scale)).clamp(1, 38) as u8;
    // The remainder is exact, as Spark's: both operands at the larger scale, in 76 digits.
    let exact = DataType::Decimal256(76, scale);
    let [a, b]: [Expr; 2] = std::mem::take(&mut function.args).try_into().expect("two arguments");
    function.args =
        vec![a.cast_to(&l, schema)?.cast_to(&exact, schema)?, b.cast_to(&r, schema)?.cast_to(&exact, schema)?];
    Ok(Transformed::yes(Expr::ScalarFunction(function).cast_to(&DataType::Decimal128(precision, scale), schema)?))
}

/// The DECIMAL types of two operands, one of them a DECIMAL and the other a DECIMAL or an
/// integer (which meets it as `integer_decimal` says).
fn decimal_operands(left: &Expr, right: &Expr, schema: &DFSchema) -> Option<(DataType, DataType)> {
    let (l, r) = (left.get_type(schema).ok()?, right.get_type(schema).ok()?);
    if !l.is_decimal() && !r.is_decimal() {
        return None;
    }
    let as_decimal = |expr: &Expr, t: DataType| match t {
        t if t.is_decimal() => Some(t),
        t if t.is_integer() => integer_decimal(expr, &t),
        _ => None,
    };
    Some((as_decimal(left, l)?, as_decimal(right, r)?))
}

/// The type the operands of `op` meet in where Spark's differs from DataFusion's: as
/// `meeting_type` says for comparisons; arithmetic has its own DECIMAL result types, so it
/// only meets in DOUBLEs.
fn operands_meeting_type(op: Operator, left: &Expr, right: &Expr, schema: &DFSchema) -> Option<DataType> {
    match meeting_type_of([left, right], schema) {
        Some(DataType::Float64) if is_binary_operator(op) => Some(DataType::Float64),
        Some(decimal) if is_comparison(op) || matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom) => {
            Some(decimal)
        }
        _ => None,
    }
}

fn doubles_over_decimals(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let meet = |expr: Box<Expr>, to: &DataType| to_meeting_type(*expr, to, schema).map(Box::new);
    let meet_all = |exprs: Vec<Expr>, to: &DataType| {
        exprs.into_iter().map(|e| to_meeting_type(e, to, schema)).collect::<Result<Vec<_>>>()
    };
    Ok(match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if let Some(to) = operands_meeting_type(op, &left, &right, schema) =>
        {
            Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: meet(left, &to)?, op, right: meet(right, &to)? }))
        }
        Expr::InList(InList { expr, list, negated })
            if let Some(to) = meeting_type_of(std::iter::once(expr.as_ref()).chain(&list), schema) =>
        {
            Transformed::yes(Expr::InList(InList { expr: meet(expr, &to)?, list: meet_all(list, &to)?, negated }))
        }
        Expr::Between(Between { expr, negated, low, high })
            if let Some(to) = meeting_type_of([expr.as_ref(), low.as_ref(), high.as_ref()], schema) =>
        {
            Transformed::yes(Expr::Between(Between {
                expr: meet(expr, &to)?,
                negated,
                low: meet(low, &to)?,
                high: meet(high, &to)?,
            }))
        }
        // CASE's results, and the arguments of the functions that return one of them.
        Expr::Case(mut case)
            if let Some(to) = meeting_type_of(
                case.when_then_expr.iter().map(|(_, then)| then.as_ref()).chain(case.else_expr.as_deref()),
                schema,
            ) =>
        {
            for (_, then) in &mut case.when_then_expr {
                *then = meet(then.clone(), &to)?;
            }
            case.else_expr = case.else_expr.map(|e| meet(e, &to)).transpose()?;
            Transformed::yes(Expr::Case(case))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Modulo)
                && (integer_literal(&left).is_some() || integer_literal(&right).is_some())
                && let Some((l, r)) = decimal_operands(&left, &right, schema) =>
        {
            let (left, right) = (left.cast_to(&l, schema)?, right.cast_to(&r, schema)?);
            Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: Box::new(left), op, right: Box::new(right) }))
        }
        // The `try_` forms of `+ - *` take an integer literal as the operators do.
        Expr::ScalarFunction(mut function)
            if ["try_add", "try_subtract", "try_multiply"].contains(&function.name())
                && function.args.len() == 2
                && function.args.iter().any(|arg| integer_literal(arg).is_some())
                && let Some((l, r)) = decimal_operands(&function.args[0], &function.args[1], schema) =>
        {
            let [a, b]: [Expr; 2] = std::mem::take(&mut function.args).try_into().expect("two arguments");
            function.args = vec![a.cast_to(&l, schema)?, b.cast_to(&r, schema)?];
            Transformed::yes(Expr::ScalarFunction(function))
        }
        Expr::ScalarFunction(function)
            if function.name() == "pmod" && function.args.len() == 2 && !needs_doubles(&function.args, schema) =>
        {
            decimal_pmod(function, schema)?
        }
        Expr::ScalarFunction(mut function)
            if ["nullif", "pmod"].contains(&function.name()) && needs_doubles(&function.args, schema) =>
        {
            function.args = meet_all(std::mem::take(&mut function.args), &DataType::Float64)?;
            Transformed::yes(Expr::ScalarFunction(function))
        }
        Expr::ScalarFunction(mut function)
            if ["coalesce", "greatest", "least", "nvl", "ifnull"].contains(&function.name())
                && let Some(to) = meeting_type_of(&function.args, schema) =>
        {
            function.args = meet_all(std::mem::take(&mut function.args), &to)?;
            Transformed::yes(Expr::ScalarFunction(function))
        }
        other => Transformed::no(other),
    })
}
