//! Spark's `Add`, `Subtract` and `Multiply` under ANSI mode (`spark.sql.ansi.enabled`, on by
//! default in Spark 4): integral arithmetic that overflows fails with ARITHMETIC_OVERFLOW
//! (22003) where DataFusion wraps around, so `CAST(2147483647 AS INT) + 1` is an error, not
//! -2147483648. `try_add`, `try_subtract` and `try_multiply` give NULL instead, row by row.
//!
//! The rule runs after DataFusion's type coercion, when both operands of an integral operator
//! have one type, and makes the operator a function of ours that computes with Arrow's checked
//! kernels (EXPLAIN prints it as the operator). DECIMAL operands go through the same function,
//! typed as Spark types them (past 38 digits, scale gives way to integral digits): a result with
//! more digits than its type's precision fails with NUMERIC_VALUE_OUT_OF_RANGE (22003), as in
//! Spark, where Arrow keeps it. Spark's `UnaryMinus` of an integer fails the same
//! way on the type's least value, which has no negation (`abs` shares the check, as Spark's
//! `Abs`). With `spark.sql.ansi.enabled = false` ([`EvalMode::Legacy`], read when the
//! function runs) integers wrap around as DataFusion's do, and a DECIMAL past its precision is
//! NULL, as in Spark. A comparison of such a DECIMAL result, which type coercion met with the
//! other operand in DataFusion's type of the result, meets it again in Spark's wider DECIMAL.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, ArrowNativeTypeOp, AsArray, Decimal128Array, PrimitiveArray};
use datafusion::arrow::compute::kernels::arity::{binary, try_binary};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Int8Type, Int16Type, Int32Type, Int64Type, i256,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::constant_folding::{evaluation_props, is_constant, value};
use super::decimal_division::{
    DECIMAL_DIVIDE, DecimalBound, decimal_operands, power_of_ten, quotient_half_up, result_decimal, wider_decimal,
};
use super::division::{ANSI_DIVIDE, ANSI_REMAINDER};
use super::expression_rule::is_comparison;
use super::expression_rule::rewrite_expressions;
use crate::config::{EvalMode, PrecisionLoss};
use crate::error::SqlError;

#[derive(Debug, Default)]
pub struct AnsiArithmetic;

impl AnalyzerRule for AnsiArithmetic {
    fn name(&self) -> &str {
        "ansi_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, options: &ConfigOptions) -> Result<LogicalPlan> {
        let (loss, props) = (PrecisionLoss::of(options), evaluation_props(options));
        rewrite_expressions(plan, |expr, schema| {
            let checked = checked_arithmetic(expr, schema, loss)?;
            Ok(if checked.transformed { checked.update_data(|expr| folded(expr, &props)) } else { checked })
        })
    }
}

/// `expr`, one of our functions, as its value when its operands are constants and it has one. A chain of
/// constants (`1 + 1 + …`) then stays a literal as it is rewritten bottom up: nested calls
/// would make every type lookup above them name the whole chain again, which took minutes of
/// planning for a thousand terms. A call that fails stays, for Spark's `ConstantFolding` to
/// raise where Spark would (not in a branch that never runs).
fn folded(expr: Expr, props: &ExecutionProps) -> Expr {
    match &expr {
        Expr::ScalarFunction(call)
            if call.args.iter().all(|arg| matches!(arg, Expr::Literal(..)) || is_constant(arg)) =>
        {
            value(&expr, props).map_or(expr, |value| Expr::Literal(value, None))
        }
        _ => expr,
    }
}

fn checked_arithmetic(expr: Expr, schema: &DFSchema, loss: PrecisionLoss) -> Result<Transformed<Expr>> {
    if let Expr::Negative(operand) = &expr
        && operand.get_type(schema).is_ok_and(|t| t.is_integer() || t.is_decimal())
    {
        let Expr::Negative(operand) = expr else { unreachable!("matched above") };
        return Ok(Transformed::yes(ANSI_NEGATE_UDF.call(vec![*operand])));
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return Ok(Transformed::no(expr));
    };
    let unchanged = |left, right| Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })));
    if is_comparison(op) {
        return decimals_compared(left, op, right, schema);
    }
    let Some(arithmetic) = Arithmetic::of(op) else { return unchanged(left, right) };
    match (left.get_type(schema), right.get_type(schema)) {
        (Ok(l), Ok(r)) if l == r && l.is_integer() => {
            Ok(Transformed::yes(arithmetic.ansi_udf(loss).call(vec![*left, *right])))
        }
        // Arrow's DECIMAL arithmetic keeps a result past its type's precision.
        (Ok(l), Ok(r)) if l.is_decimal() && r.is_decimal() => {
            Ok(Transformed::yes(arithmetic.ansi_udf(loss).call(vec![*left, *right])))
        }
        _ => unchanged(left, right),
    }
}

/// `left * right` as Spark multiplies DECIMALs (one of them may be an integer), typed as `loss`
/// says; `None` for other operands.
pub fn decimal_product(left: &Expr, right: &Expr, schema: &DFSchema, loss: PrecisionLoss) -> Result<Option<Expr>> {
    Ok(decimal_operands(left, right, schema)?.map(|args| Arithmetic::Multiply.ansi_udf(loss).call(args)))
}

/// A product of DECIMALs that DataFusion's type coercion refuses once Spark's types are given
/// to its operands (their scales add up past 38): made the checked function, typed as Spark
/// types it, before that coercion. Runs in [`DecimalPrecision`](super::decimal_precision)'s
/// pass, after the operands below it.
pub(super) fn products_past_datafusion_scales(
    expr: Expr,
    schema: &DFSchema,
    loss: PrecisionLoss,
) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Multiply, right }) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let (Ok(l), Ok(r)) = (left.get_type(schema), right.get_type(schema)) else { return Ok(Transformed::no(expr)) };
    if !(l.is_decimal() || r.is_decimal())
        || BinaryTypeCoercer::new(&l, &Operator::Multiply, &r).get_result_type().is_ok()
    {
        return Ok(Transformed::no(expr));
    }
    match decimal_product(left, right, schema, loss)? {
        Some(product) => Ok(Transformed::yes(product)),
        None => Ok(Transformed::no(expr)),
    }
}

/// `left op right` with DECIMAL operands of two types (one retyped below it) in their wider
/// DECIMAL, which Arrow's comparisons need.
fn decimals_compared(left: Box<Expr>, op: Operator, right: Box<Expr>, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let types = [left.get_type(schema), right.get_type(schema)];
    let wider = match types {
        [Ok(l), Ok(r)] if l.is_decimal() && r.is_decimal() && l != r => wider_decimal(&[l, r]),
        _ => None,
    };
    let Some(wider) = wider else { return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right }))) };
    let (left, right) = (Box::new(left.cast_to(&wider, schema)?), Box::new(right.cast_to(&wider, schema)?));
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr { left, op, right })))
}

/// The operators ANSI mode checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arithmetic {
    Add,
    Subtract,
    Multiply,
}

impl Arithmetic {
    pub const ALL: [Arithmetic; 3] = [Arithmetic::Add, Arithmetic::Subtract, Arithmetic::Multiply];

    fn of(op: Operator) -> Option<Self> {
        match op {
            Operator::Plus => Some(Arithmetic::Add),
            Operator::Minus => Some(Arithmetic::Subtract),
            Operator::Multiply => Some(Arithmetic::Multiply),
            _ => None,
        }
    }

    pub fn operator(self) -> Operator {
        match self {
            Arithmetic::Add => Operator::Plus,
            Arithmetic::Subtract => Operator::Minus,
            Arithmetic::Multiply => Operator::Multiply,
        }
    }

    /// Spark's function that gives NULL instead of failing.
    fn try_name(self) -> &'static str {
        match self {
            Arithmetic::Add => "try_add",
            Arithmetic::Subtract => "try_subtract",
            Arithmetic::Multiply => "try_multiply",
        }
    }

    fn ansi_name(self) -> &'static str {
        match self {
            Arithmetic::Add => "ansi_add",
            Arithmetic::Subtract => "ansi_subtract",
            Arithmetic::Multiply => "ansi_multiply",
        }
    }

    /// Spark's result type of two DECIMALs (`resultDecimalType` of `Add`, `Subtract` and
    /// `Multiply`): past 38 digits it keeps the integral digits and gives up scale (unless
    /// `loss` is refused), where DataFusion keeps the scale and fails on large values.
    fn decimal_type(self, loss: PrecisionLoss, (p1, s1): (u8, i8), (p2, s2): (u8, i8)) -> DataType {
        let (p1, s1, p2, s2) = (i32::from(p1), i32::from(s1), i32::from(p2), i32::from(s2));
        let (precision, scale) = match self {
            Arithmetic::Add | Arithmetic::Subtract => {
                let scale = s1.max(s2);
                ((p1 - s1).max(p2 - s2) + scale + 1, scale)
            }
            Arithmetic::Multiply => (p1 + p2 + 1, s1 + s2),
        };
        let (precision, scale) = result_decimal(loss, precision, scale);
        DataType::Decimal128(precision, scale)
    }

    fn checked<T: ArrowNativeTypeOp>(self, a: T, b: T) -> Option<T> {
        match self {
            Arithmetic::Add => a.add_checked(b),
            Arithmetic::Subtract => a.sub_checked(b),
            Arithmetic::Multiply => a.mul_checked(b),
        }
        .ok()
    }

    fn ansi_udf(self, loss: PrecisionLoss) -> Arc<ScalarUDF> {
        Arc::clone(&ANSI_UDFS[loss as usize][self as usize])
    }

    /// `try_add`, `try_subtract` or `try_multiply`, to register on a session.
    pub fn try_udf(self, loss: PrecisionLoss) -> ScalarUDF {
        ScalarUDF::new_from_impl(CheckedArithmetic::new(self, OnOverflow::Null, loss))
    }
}

/// The operator `name` of an ANSI function stands for (`ansi_add` …, `/`'s
/// `ansi_divide` and `decimal_divide`, `%`'s `ansi_remainder`), for EXPLAIN to print it as Spark does.
pub fn ansi_operator(name: &str) -> Option<Operator> {
    if name == ANSI_DIVIDE || name == DECIMAL_DIVIDE {
        return Some(Operator::Divide);
    }
    if name == ANSI_REMAINDER {
        return Some(Operator::Modulo);
    }
    Arithmetic::ALL.into_iter().find(|a| a.ansi_name() == name).map(Arithmetic::operator)
}

/// `expr` as the operator and operands it stands for, when it is one of ANSI mode's functions:
/// rules that reason about operators see through them.
pub fn ansi_binary(expr: &Expr) -> Option<(Operator, &Expr, &Expr)> {
    let Expr::ScalarFunction(function) = expr else { return None };
    let op = ansi_operator(function.name())?;
    match function.args.as_slice() {
        [left, right] => Some((op, left, right)),
        _ => None,
    }
}

static ANSI_UDFS: LazyLock<[[Arc<ScalarUDF>; 3]; 2]> = LazyLock::new(|| {
    [PrecisionLoss::Allowed, PrecisionLoss::Refused].map(|loss| {
        Arithmetic::ALL.map(|a| Arc::new(ScalarUDF::new_from_impl(CheckedArithmetic::new(a, OnOverflow::Fail, loss))))
    })
});

/// The function an integer's unary minus becomes.
pub const ANSI_NEGATE: &str = "ansi_negate";

static ANSI_NEGATE_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(AnsiNegate { signature: Signature::any(1, Volatility::Immutable) }))
});

/// Spark's `UnaryMinus` of an integer under ANSI mode.
#[derive(Debug, PartialEq, Eq, Hash)]
struct AnsiNegate {
    signature: Signature,
}

impl ScalarUDFImpl for AnsiNegate {
    fn name(&self) -> &str {
        ANSI_NEGATE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [operand] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Internal(format!("{ANSI_NEGATE} takes one argument")))?;
        let mode = EvalMode::of(&args.config_options);
        Ok(ColumnarValue::Array(match (operand.data_type(), mode) {
            (DataType::Decimal128(..), _) => negate_decimals(&operand, |_| true)?,
            (_, EvalMode::Legacy) => numeric::neg_wrapping(&operand)?,
            (_, EvalMode::Ansi) => {
                fail_on_least_integer(&operand)?;
                numeric::neg(&operand)?
            }
        }))
    }
}

/// DECIMALs negated where `negate` says, as Spark's `Decimal.unary_-` negates them: in Scala's
/// default 34 significant digits (`MathContext.DECIMAL128`, half even), then at the type's
/// scale again, so that `-x` of a value of more than 34 digits loses its last digits, and fails
/// with NUMERIC_VALUE_OUT_OF_RANGE (22003) where rounding passes the type's precision (the
/// largest DECIMAL(38, 4)), in legacy mode too. Spark's `abs` negates the same way.
pub fn negate_decimals(values: &ArrayRef, negate: impl Fn(i128) -> bool) -> Result<ArrayRef> {
    let DataType::Decimal128(precision, scale) = *values.data_type() else {
        return Err(DataFusionError::Internal(format!("{ANSI_NEGATE} of a DECIMAL took {}", values.data_type())));
    };
    let bound = DecimalBound::of(precision, scale);
    let negated = values
        .as_primitive::<Decimal128Type>()
        .iter()
        .map(|value| {
            let Some(value) = value.filter(|v| negate(*v)) else { return Ok(value) };
            let negated = in_34_digits(i256::from_i128(value)).wrapping_neg();
            bound.check(negated).map_err(|e| DataFusionError::External(Box::new(e)))?;
            Ok(Some(negated.as_i128()))
        })
        .collect::<Result<Decimal128Array>>()?;
    Ok(Arc::new(negated.with_precision_and_scale(precision, scale)?))
}

/// An unscaled `value` rounded half even to its 34 most significant digits, at its scale.
fn in_34_digits(value: i256) -> i256 {
    let digits = value.wrapping_abs().to_string().len() as u32;
    if digits <= 34 {
        return value;
    }
    let unit = power_of_ten(digits - 34);
    let (quotient, remainder) = (value.wrapping_div(unit), value.wrapping_rem(unit));
    let twice = remainder.wrapping_abs().wrapping_mul(i256::from_i128(2));
    let away = twice > unit || (twice == unit && quotient.wrapping_rem(i256::from_i128(2)) != i256::ZERO);
    let rounded = match (away, value < i256::ZERO) {
        (false, _) => quotient,
        (true, false) => quotient.wrapping_add(i256::ONE),
        (true, true) => quotient.wrapping_sub(i256::ONE),
    };
    rounded.wrapping_mul(unit)
}

/// Spark's ARITHMETIC_OVERFLOW where `values` (integers) hold their type's least value, which
/// has no negation and no absolute value.
pub fn fail_on_least_integer(values: &ArrayRef) -> Result<()> {
    fn holds<T: ArrowPrimitiveType>(values: &ArrayRef, least: T::Native) -> bool {
        values.as_primitive::<T>().iter().any(|v| v == Some(least))
    }
    let overflows = match values.data_type() {
        DataType::Int8 => holds::<Int8Type>(values, i8::MIN),
        DataType::Int16 => holds::<Int16Type>(values, i16::MIN),
        DataType::Int32 => holds::<Int32Type>(values, i32::MIN),
        DataType::Int64 => holds::<Int64Type>(values, i64::MIN),
        _ => false,
    };
    match overflows {
        true => Err(SqlError::new(
            "22003",
            "[ARITHMETIC_OVERFLOW] overflow. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
        ).into()),
        false => Ok(()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OnOverflow {
    /// ARITHMETIC_OVERFLOW (22003), as the operators under ANSI mode.
    Fail,
    /// NULL for the row, as the `try_` functions.
    Null,
    /// The operators under legacy mode: integers wrap around, DECIMALs are NULL.
    Wrap,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedArithmetic {
    arithmetic: Arithmetic,
    overflow: OnOverflow,
    loss: PrecisionLoss,
    signature: Signature,
}

impl CheckedArithmetic {
    fn new(arithmetic: Arithmetic, overflow: OnOverflow, loss: PrecisionLoss) -> Self {
        let signature = match overflow {
            OnOverflow::Fail | OnOverflow::Wrap => Signature::any(2, Volatility::Immutable),
            OnOverflow::Null => Signature::user_defined(Volatility::Immutable),
        };
        CheckedArithmetic { arithmetic, overflow, loss, signature }
    }
}

impl ScalarUDFImpl for CheckedArithmetic {
    fn name(&self) -> &str {
        match self.overflow {
            OnOverflow::Fail | OnOverflow::Wrap => self.arithmetic.ansi_name(),
            OnOverflow::Null => self.arithmetic.try_name(),
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The `try_` functions take two numbers: integers of the wider type, others as the
    /// operator would take them.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [left, right] = arg_types else {
            return Err(DataFusionError::Plan(format!("{} takes two numbers", self.name())));
        };
        let (left, right) = BinaryTypeCoercer::new(left, &self.arithmetic.operator(), right).get_input_types()?;
        Ok(vec![left, right])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let [left, right] = arg_types else {
            return Err(DataFusionError::Plan(format!("{} takes two numbers", self.name())));
        };
        match (left, right) {
            (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) => {
                Ok(self.arithmetic.decimal_type(self.loss, (*p1, *s1), (*p2, *s2)))
            }
            _ => BinaryTypeCoercer::new(left, &self.arithmetic.operator(), right).get_result_type(),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right]: [ArrayRef; 2] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| DataFusionError::Internal(format!("{} takes two arguments", self.name())))?;
        let overflow = match (self.overflow, EvalMode::of(&args.config_options)) {
            (OnOverflow::Fail, EvalMode::Legacy) => OnOverflow::Wrap,
            (overflow, _) => overflow,
        };
        let result = match left.data_type() {
            DataType::Int8 => self.integral::<Int8Type>((&left, &right), overflow),
            DataType::Int16 => self.integral::<Int16Type>((&left, &right), overflow),
            DataType::Int32 => self.integral::<Int32Type>((&left, &right), overflow),
            DataType::Int64 => self.integral::<Int64Type>((&left, &right), overflow),
            DataType::Decimal128(..) => match (right.data_type(), args.return_field.data_type()) {
                (DataType::Decimal128(..), DataType::Decimal128(precision, scale)) => {
                    self.decimal(&left, &right, *precision, *scale, overflow)
                }
                _ => Err(DataFusionError::Internal(format!("{} of a DECIMAL and another type", self.name()))),
            },
            _ => match self.arithmetic {
                Arithmetic::Add => numeric::add(&left, &right),
                Arithmetic::Subtract => numeric::sub(&left, &right),
                Arithmetic::Multiply => numeric::mul(&left, &right),
            }
            .map_err(DataFusionError::from)
            .and_then(|result| in_precision(result, overflow)),
        };
        result.map(ColumnarValue::Array)
    }
}

impl CheckedArithmetic {
    /// DECIMALs added, subtracted or multiplied exactly, in 256 bits, then brought to the
    /// result's scale rounding half up, as Spark's `Decimal` arithmetic: a value past the
    /// result's precision fails with NUMERIC_VALUE_OUT_OF_RANGE, or is NULL for the `try_`
    /// functions. Arrow's kernels would first rescale an operand in 128 bits, and fail there.
    fn decimal(
        &self,
        left: &ArrayRef,
        right: &ArrayRef,
        precision: u8,
        scale: i8,
        overflow: OnOverflow,
    ) -> Result<ArrayRef> {
        let (DataType::Decimal128(_, left_scale), DataType::Decimal128(_, right_scale)) =
            (left.data_type(), right.data_type())
        else {
            return Err(DataFusionError::Internal(format!("{} takes two DECIMALs", self.name())));
        };
        let left = (left.as_primitive::<Decimal128Type>(), *left_scale);
        let right = (right.as_primitive::<Decimal128Type>(), *right_scale);
        let values = match self.decimal_in_128_bits(left, right, precision, scale) {
            Some(values) => values,
            None => self.decimal_exact(left, right, precision, scale, overflow)?,
        };
        Ok(Arc::new(values.with_precision_and_scale(precision, scale)?))
    }

    fn decimal_exact(
        &self,
        (left, left_scale): (&Decimal128Array, i8),
        (right, right_scale): (&Decimal128Array, i8),
        precision: u8,
        scale: i8,
        overflow: OnOverflow,
    ) -> Result<Decimal128Array> {
        let bound = DecimalBound::of(precision, scale);
        let exact = |a: i128, b: i128| -> i256 {
            let (a, b) = (i256::from_i128(a), i256::from_i128(b));
            let common = left_scale.max(right_scale);
            let (a_up, b_up) = (rescale(a, left_scale, common), rescale(b, right_scale, common));
            match self.arithmetic {
                Arithmetic::Add => rescale(a_up.wrapping_add(b_up), common, scale),
                Arithmetic::Subtract => rescale(a_up.wrapping_sub(b_up), common, scale),
                Arithmetic::Multiply => rescale(a.wrapping_mul(b), left_scale + right_scale, scale),
            }
        };
        left.iter()
            .zip(right.iter())
            .map(|(a, b)| {
                let (Some(a), Some(b)) = (a, b) else { return Ok(None) };
                let value = exact(a, b);
                match (bound.check(value), overflow) {
                    (Ok(()), _) => Ok(Some(value.as_i128())),
                    (Err(_), OnOverflow::Null | OnOverflow::Wrap) => Ok(None),
                    (Err(e), OnOverflow::Fail) => Err(DataFusionError::External(Box::new(e))),
                }
            })
            .collect()
    }

    /// The common case of [`Self::decimal`] at Arrow's speed: where the exact result has the
    /// result's scale already (nothing to round) and every value fits 128 bits and the result's
    /// precision. None where a value does not, for the exact path to give its error or NULL.
    /// Where the operands' largest values (under NULLs too) leave no room for a result past the
    /// result's precision, nothing is checked value by value, and operands that fit a long
    /// multiply in one 64-bit instruction.
    fn decimal_in_128_bits(
        &self,
        (left, left_scale): (&Decimal128Array, i8),
        (right, right_scale): (&Decimal128Array, i8),
        precision: u8,
        scale: i8,
    ) -> Option<Decimal128Array> {
        let limit = 10u128.checked_pow(u32::from(precision))?;
        let fits = |v: Option<i128>| {
            v.filter(|v| v.unsigned_abs() < limit).ok_or_else(|| ArrowError::ComputeError(String::new()))
        };
        let computed = match self.arithmetic {
            Arithmetic::Multiply if left_scale + right_scale == scale => {
                let (left_largest, right_largest) = (magnitude_bound(left), magnitude_bound(right));
                let long = i64::MAX as u128;
                match left_largest.checked_mul(right_largest) {
                    Some(largest) if largest < limit && left_largest <= long && right_largest <= long => {
                        binary(left, right, |a: i128, b: i128| i128::from(a as i64) * i128::from(b as i64))
                    }
                    Some(largest) if largest < limit => binary(left, right, |a: i128, b: i128| a * b),
                    _ => try_binary::<_, _, _, Decimal128Type>(left, right, |a: i128, b: i128| fits(a.checked_mul(b))),
                }
            }
            Arithmetic::Add | Arithmetic::Subtract if left_scale.max(right_scale) == scale && scale >= 0 => {
                let factor = |from: i8| 10i128.checked_pow((scale - from) as u32);
                let (left_factor, right_factor) = (factor(left_scale)?, factor(right_scale)?);
                let subtract = self.arithmetic == Arithmetic::Subtract;
                let largest = magnitude_bound(left)
                    .checked_mul(left_factor.unsigned_abs())
                    .zip(magnitude_bound(right).checked_mul(right_factor.unsigned_abs()))
                    .and_then(|(a, b)| a.checked_add(b));
                if largest.is_some_and(|largest| largest < limit) {
                    let right_factor = if subtract { -right_factor } else { right_factor };
                    binary(left, right, |a: i128, b: i128| a * left_factor + b * right_factor)
                } else {
                    try_binary::<_, _, _, Decimal128Type>(left, right, |a: i128, b: i128| {
                        let (a, b) = (a.checked_mul(left_factor), b.checked_mul(right_factor));
                        fits(a.zip(b).and_then(|(a, b)| if subtract { a.checked_sub(b) } else { a.checked_add(b) }))
                    })
                }
            }
            _ => return None,
        };
        computed.ok()
    }

    /// Integers added, subtracted or multiplied as Java's operators do, wrapping around.
    fn wrapping(&self, left: &ArrayRef, right: &ArrayRef) -> Result<ArrayRef> {
        Ok(match self.arithmetic {
            Arithmetic::Add => numeric::add_wrapping(left, right),
            Arithmetic::Subtract => numeric::sub_wrapping(left, right),
            Arithmetic::Multiply => numeric::mul_wrapping(left, right),
        }?)
    }

    fn integral<T: ArrowPrimitiveType>(
        &self,
        arrays: (&ArrayRef, &ArrayRef),
        overflow: OnOverflow,
    ) -> Result<ArrayRef> {
        let (left, right) = (arrays.0.as_primitive::<T>(), arrays.1.as_primitive::<T>());
        let arithmetic = self.arithmetic;
        let pairs = || left.iter().zip(right.iter());
        match overflow {
            OnOverflow::Wrap => self.wrapping(arrays.0, arrays.1),
            OnOverflow::Null => {
                let result: PrimitiveArray<T> = pairs().map(|(a, b)| arithmetic.checked(a?, b?)).collect();
                Ok(Arc::new(result))
            }
            OnOverflow::Fail => {
                let checked = try_binary::<_, _, _, T>(left, right, |a, b| {
                    arithmetic.checked(a, b).ok_or_else(|| ArrowError::ComputeError(String::new()))
                });
                match checked {
                    Ok(result) => Ok(Arc::new(result) as ArrayRef),
                    Err(_) => {
                        let (a, b) = pairs()
                            .filter_map(|(a, b)| Some((a?, b?)))
                            .find(|(a, b)| arithmetic.checked(*a, *b).is_none())
                            .expect("a row that overflowed");
                        Err(DataFusionError::External(Box::new(self.overflow_error(
                            left.data_type(),
                            format!("{a:?}"),
                            format!("{b:?}"),
                        ))))
                    }
                }
            }
        }
    }

    /// Spark's error: BINARY_ARITHMETIC_OVERFLOW with the operands for the short types,
    /// ARITHMETIC_OVERFLOW for INT and BIGINT.
    fn overflow_error(&self, data_type: &DataType, left: String, right: String) -> SqlError {
        let try_name = self.arithmetic.try_name();
        let message = if matches!(data_type, DataType::Int8 | DataType::Int16) {
            let symbol = self.arithmetic.operator();
            format!(
                "[BINARY_ARITHMETIC_OVERFLOW] {left}S {symbol} {right}S caused overflow. Use `{try_name}` to ignore overflow problem and return NULL."
            )
        } else {
            format!(
                "[ARITHMETIC_OVERFLOW] overflow. Use '{try_name}' to tolerate overflow and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error."
            )
        };
        SqlError::new("22003", message)
    }
}

/// A bound on the magnitudes of `values` (under NULLs too), within twice the largest: their
/// bits or-ed together, in one pass that vectorizes.
fn magnitude_bound(values: &Decimal128Array) -> u128 {
    values.values().iter().fold(0, |bound, v| bound | v.unsigned_abs())
}

/// A DECIMAL `result` whose values all fit its precision; where one does not, Spark's
/// NUMERIC_VALUE_OUT_OF_RANGE, or NULL in its place for the `try_` functions and legacy mode.
fn in_precision(result: ArrayRef, overflow: OnOverflow) -> Result<ArrayRef> {
    let DataType::Decimal128(precision, scale) = *result.data_type() else { return Ok(result) };
    let bound = DecimalBound::of(precision, scale);
    let decimals = result.as_primitive::<Decimal128Type>();
    let fits = |v: i128| bound.check(i256::from_i128(v));
    match overflow {
        OnOverflow::Fail => {
            for v in decimals.iter().flatten() {
                fits(v).map_err(|e| DataFusionError::External(Box::new(e)))?;
            }
            Ok(result)
        }
        OnOverflow::Null | OnOverflow::Wrap => {
            let kept: Decimal128Array = decimals.iter().map(|v| v.filter(|v| fits(*v).is_ok())).collect();
            Ok(Arc::new(kept.with_precision_and_scale(precision, scale)?))
        }
    }
}

/// `value`, a DECIMAL of scale `from`, at scale `to`: multiplied up, or divided down rounding
/// half up (away from zero on a half), as Spark's `Decimal.changePrecision`.
fn rescale(value: i256, from: i8, to: i8) -> i256 {
    if to >= from {
        return value.wrapping_mul(power_of_ten((to - from) as u32));
    }
    quotient_half_up(value, power_of_ten((from - to) as u32))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{Field, Int32Type, Schema};
    use datafusion::logical_expr::{col, lit, table_scan};

    use super::*;

    fn schema() -> DFSchema {
        let fields = [("i", DataType::Int32), ("j", DataType::Int32), ("d", DataType::Float64)];
        DFSchema::try_from(Schema::new(fields.map(|(name, dt)| Field::new(name, dt, true)).to_vec())).unwrap()
    }

    /// Where the 128-bit path answers, it answers as the exact path does; it declines where a
    /// value overflows, or where the result must be rounded.
    #[test]
    fn decimals_in_128_bits_agree_with_the_exact_arithmetic() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // (operation, left type, right type, largest operand, whether every result fits)
        let cases = [
            (Arithmetic::Multiply, (15, 2), (16, 2), 10i128.pow(15), true),
            (Arithmetic::Multiply, (32, 4), (16, 2), 10i128.pow(20), true),
            (Arithmetic::Multiply, (38, 0), (38, 0), 10i128.pow(30), false),
            (Arithmetic::Add, (10, 3), (12, 5), 10i128.pow(10), true),
            (Arithmetic::Subtract, (38, 2), (38, 2), 10i128.pow(38) - 1, false),
            (Arithmetic::Subtract, (7, 0), (20, 9), 10i128.pow(7), true),
            (Arithmetic::Multiply, (38, 10), (38, 10), 10i128.pow(10), true),
            (Arithmetic::Multiply, (18, 0), (18, 3), 10i128.pow(18) - 1, true),
            (Arithmetic::Multiply, (19, 0), (18, 0), 10i128.pow(19) - 1, true),
            (Arithmetic::Add, (37, 0), (37, 0), 10i128.pow(37) - 1, true),
        ];
        for (arithmetic, (p1, s1), (p2, s2), largest, all_fit) in cases {
            let DataType::Decimal128(precision, scale) =
                arithmetic.decimal_type(PrecisionLoss::Allowed, (p1, s1), (p2, s2))
            else {
                unreachable!()
            };
            let mut operand = |p: u8, s: i8| {
                let bound = largest.min(10i128.pow(u32::from(p))) as u128;
                let values = (0..500).map(|i| {
                    let magnitude = (u128::from(next()) * u128::from(next()) % bound) as i128;
                    (i % 7 != 0).then_some(if next() % 2 == 0 { magnitude } else { -magnitude })
                });
                values.collect::<Decimal128Array>().with_precision_and_scale(p, s).unwrap()
            };
            let (left, right) = (operand(p1, s1), operand(p2, s2));
            let function = CheckedArithmetic::new(arithmetic, OnOverflow::Null, PrecisionLoss::Allowed);
            let exact = function.decimal_exact((&left, s1), (&right, s2), precision, scale, OnOverflow::Null).unwrap();
            let case = format!("{arithmetic:?} ({p1},{s1}) ({p2},{s2}) into ({precision},{scale})");
            let both_valid = left.iter().zip(right.iter()).filter(|(a, b)| a.is_some() && b.is_some()).count();
            let overflowed = exact.len() - exact.null_count() < both_valid;
            assert_eq!(overflowed, !all_fit, "{case}");
            let rounded = match arithmetic {
                Arithmetic::Multiply => s1 + s2 != scale,
                _ => s1.max(s2) != scale,
            };
            match function.decimal_in_128_bits((&left, s1), (&right, s2), precision, scale) {
                Some(fast) => {
                    assert!(!overflowed && !rounded, "{case}: answered");
                    assert_eq!(fast, exact, "{case}");
                }
                None => assert!(overflowed || rounded, "{case}: declined"),
            }
        }
    }

    /// Integral operands of one type become the checked function; others keep the operator.
    /// Spark 4.3: `-x` of 1234567890123456789012345678901234.5678, of
    /// 12345678901234567890123456789012.345 and of -12345678901234567890123456789012.355.
    #[test]
    fn decimals_of_more_than_34_digits_round_half_even_when_negated() {
        let value = |s: &str| i256::from_string(s).unwrap();
        for (unscaled, expected) in [
            ("12345678901234567890123456789012345678", "12345678901234567890123456789012350000"),
            ("12345678901234567890123456789012345", "12345678901234567890123456789012340"),
            ("-12345678901234567890123456789012355", "-12345678901234567890123456789012360"),
            ("1234567890123456789012345678901234", "1234567890123456789012345678901234"),
        ] {
            assert_eq!(in_34_digits(value(unscaled)), value(expected), "{unscaled}");
        }
    }

    #[test]
    fn only_integral_operators_of_one_type_are_checked() {
        let cases = [
            (col("i") + col("j"), Some("ansi_add")),
            (col("i") - col("j"), Some("ansi_subtract")),
            (col("i") * col("j"), Some("ansi_multiply")),
            (col("d") + col("d"), None),
            (col("i") + lit(1i64), None),
            (col("i").gt(col("j")), None),
        ];
        for (expr, expected) in cases {
            let rewritten = checked_arithmetic(expr.clone(), &schema(), PrecisionLoss::Allowed).unwrap();
            let name = match &rewritten.data {
                Expr::ScalarFunction(f) => Some(f.name()),
                _ => None,
            };
            assert_eq!(name, expected, "{expr}");
            assert_eq!(rewritten.transformed, expected.is_some());
        }
        assert_eq!(ansi_operator("ansi_multiply"), Some(Operator::Multiply));
        assert_eq!(ansi_operator("try_add"), None);
        assert_eq!(ansi_operator("ansi_divide"), Some(Operator::Divide));
    }

    /// A chain of constants is one literal once rewritten; a chain that overflows keeps its
    /// calls, for `ConstantFolding` to raise, and so does one over a column.
    #[test]
    fn calls_of_constants_are_folded_as_they_are_made() {
        let chain = |first: Expr| (1..100).fold(first, |sum, _| sum + lit(1i32));
        let analyzed = |expr: Expr| {
            let table = table_scan(Some("t"), schema().as_arrow(), None).unwrap();
            let plan = table.project(vec![expr.alias("s")]).unwrap().build().unwrap();
            let LogicalPlan::Projection(projection) = AnsiArithmetic.analyze(plan, &ConfigOptions::default()).unwrap()
            else {
                panic!("a projection")
            };
            projection.expr[0].clone().unalias()
        };
        assert_eq!(analyzed(chain(lit(1i32))), lit(100i32));
        assert_eq!(analyzed(-chain(lit(1i32))), lit(-100i32));
        for unfolded in [chain(lit(i32::MAX)), chain(lit(1i32)) + col("i")] {
            let analyzed = analyzed(unfolded);
            assert!(matches!(analyzed, Expr::ScalarFunction(_)), "{analyzed}");
        }
    }

    fn apply(udf: &ScalarUDF, left: Vec<Option<i32>>, right: Vec<Option<i32>>) -> Result<Vec<Option<i32>>> {
        let rows = left.len();
        let args = ScalarFunctionArgs {
            args: [left, right].map(|v| ColumnarValue::Array(Arc::new(Int32Array::from(v)))).to_vec(),
            arg_fields: ["a", "b"].map(|name| Arc::new(Field::new(name, DataType::Int32, true))).to_vec(),
            number_rows: rows,
            return_field: Arc::new(Field::new("r", DataType::Int32, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let ColumnarValue::Array(result) = udf.invoke_with_args(args)? else { panic!("an array") };
        Ok(result.as_primitive::<Int32Type>().iter().collect())
    }

    /// Spark 4.3: `try_add(2147483647, 1)` is NULL, other rows add; `2147483647 + 1` fails.
    #[test]
    fn an_overflow_fails_the_operator_and_nulls_the_try_function() {
        let (left, right) = (vec![Some(i32::MAX), Some(1), None], vec![Some(1), Some(2), Some(3)]);
        let tried = apply(&Arithmetic::Add.try_udf(PrecisionLoss::Allowed), left.clone(), right.clone()).unwrap();
        assert_eq!(tried, [None, Some(3), None]);
        let error = apply(&Arithmetic::Add.ansi_udf(PrecisionLoss::Allowed), left, right).unwrap_err();
        assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] overflow. Use 'try_add'"), "{error}");
        let fine = apply(
            &Arithmetic::Multiply.ansi_udf(PrecisionLoss::Allowed),
            vec![Some(46340), None],
            vec![Some(46340), Some(7)],
        );
        assert_eq!(fine.unwrap(), [Some(2147395600), None]);
    }
}
