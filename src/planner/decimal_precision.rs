//! Spark's `DecimalPrecision` rule, in the part where DataFusion decides the other way: in an
//! expression that mixes a DECIMAL with a FLOAT or DOUBLE (a comparison, arithmetic, `IN`,
//! `BETWEEN`), Spark casts the decimal to DOUBLE. DataFusion casts the double to
//! DECIMAL(30, 15) for comparisons, which fails on NaN and infinities and on any value past
//! 10^15 (`d > 1.5`, with `1.5` a decimal literal as Spark reads it, errors once a row holds
//! 1e20), and rounds away digits past the fifteenth. The same goes for the results of a CASE,
//! the arguments of `coalesce`, `greatest`, `least` and their kind, and the columns of a set
//! operation (Spark's `findWiderTypeForDecimal`). An integer literal beside a DECIMAL in
//! `+ - * %` and `pmod` becomes the narrowest DECIMAL that holds it, as in Spark (the type
//! coercion that follows gives an integer column its type's DECIMAL, as Spark's does), so
//! `CAST(3 AS DECIMAL(12,2)) * 3` is a DECIMAL(14, 2); `pmod` of DECIMALs has Spark's remainder
//! type. With them goes `AnsiTypeCoercion`'s widening of a FLOAT beside an integer: both become
//! DOUBLEs, as an INT does not fit a FLOAT's 24 bits, where DataFusion computes in FLOAT. Runs
//! just before DataFusion's type coercion, which then finds nothing to decide.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::{Between, BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, Union};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule::is_comparison;
use super::expression_rule::rewrite_expressions;
use super::widen_set_operation_types::{is_set_operation, project_cast};

#[derive(Debug, Default)]
pub struct DecimalPrecision;

impl AnalyzerRule for DecimalPrecision {
    fn name(&self) -> &str {
        "decimal_precision"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = plan.transform_up_with_subqueries(doubles_over_decimal_columns)?.data;
        rewrite_expressions(plan, doubles_over_decimals)
    }
}

/// A set operation's columns: a column some input has as DOUBLE and another as DECIMAL (or as
/// FLOAT and as an integer) is a DOUBLE in every input (a UNION's inputs, the keys of EXCEPT's and INTERSECT's join).
fn doubles_over_decimal_columns(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Union(union) => {
            let width = union.schema.fields().len();
            let mixed: Vec<bool> = (0..width)
                .map(|i| {
                    let types: Vec<DataType> =
                        union.inputs.iter().map(|input| input.schema().field(i).data_type().clone()).collect();
                    doubles_among(&types)
                })
                .collect();
            if !mixed.contains(&true) {
                return Ok(Transformed::no(LogicalPlan::Union(union)));
            }
            let inputs = union
                .inputs
                .into_iter()
                .map(|input| {
                    let doubles: Vec<Option<DataType>> = input
                        .schema()
                        .fields()
                        .iter()
                        .zip(&mixed)
                        .map(|(field, &mixed)| {
                            (mixed && becomes_double(field.data_type())).then_some(DataType::Float64)
                        })
                        .collect();
                    project_cast(Arc::unwrap_or_clone(input), &doubles).map(Arc::new)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Transformed::yes(LogicalPlan::Union(Union::try_new_with_loose_types(inputs)?)))
        }
        LogicalPlan::Join(mut join) if is_set_operation(&join) => {
            let (left, right) = (Arc::clone(join.left.schema()), Arc::clone(join.right.schema()));
            let mut changed = false;
            for (l, r) in &mut join.on {
                if needs_doubles([&*l, &*r], &left.join(&right)?) {
                    *l = as_double(l.clone(), &left)?;
                    *r = as_double(r.clone(), &right)?;
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

/// Whether `exprs` meet as DOUBLEs where DataFusion would choose otherwise: some are floating
/// point and some DECIMAL, or some FLOAT and some integer.
fn needs_doubles<'a>(exprs: impl IntoIterator<Item = &'a Expr>, schema: &DFSchema) -> bool {
    let types: Vec<DataType> = exprs.into_iter().filter_map(|e| e.get_type(schema).ok()).collect();
    doubles_among(&types)
}

fn doubles_among(types: &[DataType]) -> bool {
    let any = |is: fn(&DataType) -> bool| types.iter().any(is);
    (any(DataType::is_floating) && any(DataType::is_decimal))
        || (any(|t| *t == DataType::Float32) && any(DataType::is_integer))
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
    let [a, b]: [Expr; 2] = std::mem::take(&mut function.args).try_into().expect("two arguments");
    function.args = vec![a.cast_to(&l, schema)?, b.cast_to(&r, schema)?];
    Ok(Transformed::yes(Expr::ScalarFunction(function).cast_to(&DataType::Decimal128(precision, scale), schema)?))
}

/// The DECIMAL types of two operands, one of them a DECIMAL and the other a DECIMAL or an
/// integer, as Spark's `DecimalPrecision` gives an integer one: an INT, SMALLINT or BIGINT
/// literal the narrowest DECIMAL holding it (`DecimalType.fromLiteral`: 3 is DECIMAL(1, 0)), any
/// other integer its type's (`DecimalType.forType`: an INT is DECIMAL(10, 0)).
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

fn integer_decimal(expr: &Expr, data_type: &DataType) -> Option<DataType> {
    let precision = match integer_literal(expr) {
        Some(value) => value.unsigned_abs().checked_ilog10().map_or(1, |digits| digits as u8 + 1),
        None => match data_type {
            DataType::Int8 | DataType::UInt8 => 3,
            DataType::Int16 | DataType::UInt16 => 5,
            DataType::Int32 | DataType::UInt32 => 10,
            _ => 20,
        },
    };
    Some(DataType::Decimal128(precision, 0))
}

/// The value of an INT, SMALLINT or BIGINT literal, perhaps negated or cast to one (a number
/// the SQL rewrite made an INT); not a TINYINT's, which Spark gives its type's DECIMAL.
fn integer_literal(expr: &Expr) -> Option<i64> {
    match expr {
        Expr::Literal(value, _) => match value {
            ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int64(Some(v)) => Some(*v),
            _ => None,
        },
        Expr::Cast(cast) if matches!(cast.field.data_type(), DataType::Int16 | DataType::Int32 | DataType::Int64) => {
            integer_literal(&cast.expr)
        }
        Expr::Negative(inner) => integer_literal(inner).and_then(i64::checked_neg),
        _ => None,
    }
}

/// `expr` as DOUBLE if it is a DECIMAL, an integer or a FLOAT, unchanged otherwise.
fn as_double(expr: Expr, schema: &DFSchema) -> Result<Expr> {
    if expr.get_type(schema).is_ok_and(|t| becomes_double(&t)) {
        expr.cast_to(&DataType::Float64, schema)
    } else {
        Ok(expr)
    }
}

fn doubles_over_decimals(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let double = |expr: Box<Expr>| as_double(*expr, schema).map(Box::new);
    Ok(match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if is_binary_operator(op) && needs_doubles([left.as_ref(), right.as_ref()], schema) =>
        {
            Transformed::yes(Expr::BinaryExpr(BinaryExpr { left: double(left)?, op, right: double(right)? }))
        }
        Expr::InList(InList { expr, list, negated })
            if needs_doubles(std::iter::once(expr.as_ref()).chain(&list), schema) =>
        {
            let list = list.into_iter().map(|item| as_double(item, schema)).collect::<Result<_>>()?;
            Transformed::yes(Expr::InList(InList { expr: double(expr)?, list, negated }))
        }
        Expr::Between(Between { expr, negated, low, high })
            if needs_doubles([expr.as_ref(), low.as_ref(), high.as_ref()], schema) =>
        {
            Transformed::yes(Expr::Between(Between {
                expr: double(expr)?,
                negated,
                low: double(low)?,
                high: double(high)?,
            }))
        }
        // CASE's results, and the arguments of the functions that return one of them.
        Expr::Case(mut case)
            if needs_doubles(
                case.when_then_expr.iter().map(|(_, then)| then.as_ref()).chain(case.else_expr.as_deref()),
                schema,
            ) =>
        {
            for (_, then) in &mut case.when_then_expr {
                *then = double(then.clone())?;
            }
            case.else_expr = case.else_expr.map(double).transpose()?;
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
        Expr::ScalarFunction(function)
            if function.name() == "pmod" && function.args.len() == 2 && !needs_doubles(&function.args, schema) =>
        {
            decimal_pmod(function, schema)?
        }
        Expr::ScalarFunction(mut function)
            if ["coalesce", "greatest", "least", "nvl", "ifnull", "nullif", "pmod"].contains(&function.name())
                && needs_doubles(&function.args, schema) =>
        {
            function.args = function.args.into_iter().map(|arg| as_double(arg, schema)).collect::<Result<_>>()?;
            Transformed::yes(Expr::ScalarFunction(function))
        }
        other => Transformed::no(other),
    })
}
