//! Spark's logarithms, `exp` and `pow`, which are Java's `StrictMath` (fdlibm): `ln`, `log`,
//! `log10`, `log2`, `exp`, `pow` and `power`, on DOUBLEs, computed with the `libm` crate's
//! fdlibm-derived functions so that the last bit agrees (Rust's own use the C library's:
//! `exp(1)` was 2.718281828459045 where Spark's is 2.7182818284590455). A logarithm of 0 or
//! less, or to a base of 0 or less, is NULL; `log(x)` is the natural logarithm, as in Spark
//! (DataFusion's is base 10), `log(b, x)` is `ln(x) / ln(b)` and `log2(x)` is `ln(x) / ln(2)`,
//! as Spark computes them.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Function {
    Ln,
    Log,
    Log10,
    Log2,
    Exp,
    Pow,
    Power,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct StrictMath {
    function: Function,
    signature: Signature,
}

/// The functions, to register in place of DataFusion's.
pub fn spark_strict_math() -> [ScalarUDF; 7] {
    use Function::*;
    [Ln, Log, Log10, Log2, Exp, Pow, Power].map(|function| {
        ScalarUDF::new_from_impl(StrictMath { function, signature: Signature::user_defined(Volatility::Immutable) })
    })
}

/// Spark's `UnaryLogExpression`: NULL at and below 0, NaN of NaN (which is not below 0).
fn logarithm(x: f64, log: impl Fn(f64) -> f64) -> Option<f64> {
    has_logarithm(x).then(|| log(x))
}

/// Whether Spark takes the logarithm of `x`: NaN is not at or below 0.
fn has_logarithm(x: f64) -> bool {
    x > 0.0 || x.is_nan()
}

impl Function {
    fn arguments(self) -> &'static [usize] {
        match self {
            Function::Log => &[1, 2],
            Function::Pow | Function::Power => &[2],
            _ => &[1],
        }
    }

    fn apply(self, args: &[f64]) -> Option<f64> {
        match (self, args) {
            (Function::Ln | Function::Log, [x]) => logarithm(*x, libm::log),
            (Function::Log, [base, x]) => {
                (has_logarithm(*base) && has_logarithm(*x)).then(|| libm::log(*x) / libm::log(*base))
            }
            (Function::Log10, [x]) => logarithm(*x, libm::log10),
            (Function::Log2, [x]) => logarithm(*x, |x| libm::log(x) / libm::log(2.0)),
            (Function::Exp, [x]) => Some(libm::exp(*x)),
            (Function::Pow | Function::Power, [x, y]) => Some(libm::pow(*x, *y)),
            _ => None,
        }
    }
}

impl ScalarUDFImpl for StrictMath {
    fn name(&self) -> &str {
        match self.function {
            Function::Ln => "ln",
            Function::Log => "log",
            Function::Log10 => "log10",
            Function::Log2 => "log2",
            Function::Exp => "exp",
            Function::Pow => "pow",
            Function::Power => "power",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Numbers as DOUBLEs, as Spark's `ImplicitCastInputTypes` makes them.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let numbers = arg_types.iter().all(|t| t.is_numeric() || t.is_null());
        if !numbers || !self.function.arguments().contains(&arg_types.len()) {
            return plan_err!("{} takes {:?} numbers, not {arg_types:?}", self.name(), self.function.arguments());
        }
        Ok(vec![DataType::Float64; arg_types.len()])
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let columns = ColumnarValue::values_to_arrays(&args.args)?;
        let columns: Vec<_> = columns.iter().map(|c| c.as_primitive::<Float64Type>()).collect();
        let rows = columns.first().map_or(0, |c| c.len());
        let values: Float64Array = (0..rows)
            .map(|row| {
                let row: Option<Vec<f64>> = columns.iter().map(|c| (!c.is_null(row)).then(|| c.value(row))).collect();
                self.function.apply(&row?)
            })
            .collect();
        let values: ArrayRef = Arc::new(values);
        Ok(match args.args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_))) {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&values, 0)?),
            false => ColumnarValue::Array(values),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3's answers.
    #[test]
    fn the_last_bit_is_strict_maths() {
        for (function, args, expected) in [
            (Function::Ln, vec![299.0], Some(5.700443573390686)),
            (Function::Log, vec![10.0], Some(std::f64::consts::LN_10)),
            (Function::Log, vec![1.0, 2.0], Some(f64::INFINITY)),
            (Function::Log, vec![0.0, 2.0], None),
            (Function::Log2, vec![10.0], Some(3.3219280948873626)),
            (Function::Log10, vec![7.0], Some(0.8450980400142568)),
            (Function::Exp, vec![1.0], Some(2.7182818284590455)),
            (Function::Exp, vec![0.5], Some(1.6487212707001282)),
            (Function::Pow, vec![1.0000001, 1e9], Some(2.6881038582144647e43)),
            (Function::Ln, vec![1e-300], Some(-690.7755278982137)),
            (Function::Exp, vec![709.5], Some(1.3549863193146328e308)),
        ] {
            assert_eq!(function.apply(&args), expected, "{function:?}{args:?}");
        }
        // Spark 4.3: `ln(NaN)`, `log10(NaN)` and `log(2, NaN)` are NaN; `ln(-0.0)` is NULL.
        assert!(Function::Ln.apply(&[f64::NAN]).is_some_and(f64::is_nan));
        assert!(Function::Log10.apply(&[f64::NAN]).is_some_and(f64::is_nan));
        assert!(Function::Log.apply(&[2.0, f64::NAN]).is_some_and(f64::is_nan));
        assert_eq!(Function::Ln.apply(&[-0.0]), None);
    }
}
