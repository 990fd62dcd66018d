//! Spark's `pmod(a, b)` (`Pmod` in `arithmetic.scala`). Under ANSI mode a zero `b` fails with
//! REMAINDER_BY_ZERO (`22012`), for DOUBLEs too, unless `a` is NULL; under legacy mode
//! (`spark.sql.ansi.enabled = false`) it gives NULL. Integers and floats are computed as Spark's
//! Java does, `r = a % b; if (r < 0) (r + b) % b else r`: integers wrapping, where the `pmod` of
//! `datafusion-spark` fails on an overflow of `r + b` (`pmod(-128, -9223372036854775808)`), and
//! floats keeping -0.0, which that `pmod` makes 0.0. DECIMALs are that `pmod`'s.

use std::ops::{Add, Rem};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, ArrowNativeTypeOp, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::arity::binary;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};

use super::overridden::{Invoke, overridden};
use crate::config::EvalMode;
use crate::error::SqlError;
use crate::planner::division::null_where_zero;

#[derive(Debug, PartialEq, Eq, Hash)]
struct ZeroDivisorFails;

/// The session's `pmod`, or `None` if there is none.
pub fn spark_pmod(lookup: impl Fn(&str) -> Option<Arc<ScalarUDF>>) -> Option<ScalarUDF> {
    overridden(lookup("pmod"), ZeroDivisorFails)
}

impl Invoke for ZeroDivisorFails {
    fn invoke(&self, inner: &ScalarUDF, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let legacy = EvalMode::of(&args.config_options) == EvalMode::Legacy;
        if legacy {
            let divisors = args.args[1].to_array(args.number_rows)?;
            args.args[1] = ColumnarValue::Array(null_where_zero(&divisors)?);
        }
        // Columns of one length: a scalar beside a column is repeated, two scalars are one row.
        let [dividends, divisors] = <[_; 2]>::try_from(ColumnarValue::values_to_arrays(&args.args)?)
            .map_err(|_| DataFusionError::Internal("pmod takes two arguments".into()))?;
        if !legacy {
            let zeros = cast(&divisors, &DataType::Float64)?;
            let zeros = zeros.as_primitive::<Float64Type>();
            // A NULL dividend gives NULL before the divisor is looked at.
            let zero_divisor = |row: usize| dividends.is_valid(row) && zeros.is_valid(row) && zeros.value(row) == 0.0;
            if (0..zeros.len()).any(zero_divisor) {
                return Err(SqlError::new(
                    "22012",
                    "[REMAINDER_BY_ZERO] Remainder by zero. Use `try_mod` to tolerate divisor being 0 and return NULL instead.",
                ).into());
            }
        }
        java_or(inner, args, [dividends, divisors])
    }
}

/// `pmod` of integers in Java's wrapping arithmetic and of floats in Java's; of other types
/// (DECIMALs), `inner`'s. `arrays`: the arguments as columns of one length.
fn java_or(inner: &ScalarUDF, args: ScalarFunctionArgs, arrays: [ArrayRef; 2]) -> Result<ColumnarValue> {
    let [dividends, divisors] = arrays;
    let result = match (dividends.data_type(), divisors.data_type()) {
        // Java computes a `byte`'s and a `short`'s remainder and sum as `int`s.
        (DataType::Int8, DataType::Int8) => {
            pmod_of::<Int8Type>(&dividends, &divisors, |a, n| java_pmod::<i32>(a.into(), n.into()) as i8)
        }
        (DataType::Int16, DataType::Int16) => {
            pmod_of::<Int16Type>(&dividends, &divisors, |a, n| java_pmod::<i32>(a.into(), n.into()) as i16)
        }
        (DataType::Int32, DataType::Int32) => pmod_of::<Int32Type>(&dividends, &divisors, java_pmod),
        (DataType::Int64, DataType::Int64) => pmod_of::<Int64Type>(&dividends, &divisors, java_pmod),
        (DataType::Float32, DataType::Float32) => pmod_of::<Float32Type>(&dividends, &divisors, java_float_pmod),
        (DataType::Float64, DataType::Float64) => pmod_of::<Float64Type>(&dividends, &divisors, java_float_pmod),
        _ => return inner.invoke_with_args(args),
    }?;
    Ok(match args.args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_))) {
        true => ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?),
        false => ColumnarValue::Array(result),
    })
}

/// `pmod` of each row's integers of type `T`.
fn pmod_of<T: ArrowPrimitiveType>(
    dividends: &ArrayRef,
    divisors: &ArrayRef,
    pmod: impl Fn(T::Native, T::Native) -> T::Native,
) -> Result<ArrayRef> {
    Ok(Arc::new(binary::<_, _, _, T>(dividends.as_primitive::<T>(), divisors.as_primitive::<T>(), pmod)?))
}

/// Spark's `pmod(a, n)` of Java integers: `r = a % n; if (r < 0) (r + n) % n else r`, wrapping
/// as Java's `%` and `+` do. A zero divisor is a NULL row here (failed or made NULL above).
fn java_pmod<N: ArrowNativeTypeOp>(a: N, n: N) -> N {
    if n.is_zero() {
        return N::ZERO;
    }
    let r = a.mod_wrapping(n);
    if r.is_lt(N::ZERO) { r.add_wrapping(n).mod_wrapping(n) } else { r }
}

/// Spark's `pmod(a, n)` of Java floats: `r = a % n; if (r < 0) (r + n) % n else r`, where
/// `-0.0 < 0` and comparisons with NaN are false, so -0.0 and NaN stay as they are.
fn java_float_pmod<F: Copy + PartialOrd + Default + Add<Output = F> + Rem<Output = F>>(a: F, n: F) -> F {
    let r = a % n;
    if r < F::default() { (r + n) % n } else { r }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int16Array, Int64Array};
    use datafusion::arrow::datatypes::Field;
    use datafusion::common::config::ConfigOptions;

    use super::*;

    /// Spark 4.3's answers, as it gave them: `pmod(-128, -9223372036854775808)` wraps around in
    /// `r + n`, `pmod(-9223372036854775808, -1)` is 0, and a negative divisor keeps a positive
    /// remainder; SMALLINTs add as Java's `int`s, so `pmod(-128, -32768)` is -128.
    #[test]
    fn integers_wrap_as_java_does() {
        let pairs =
            [(-128, i64::MIN, 9223372036854775680), (i64::MIN, -1, 0), (-7, 3, 2), (7, -3, 1), (-128, 127, 126)];
        let dividends: ArrayRef = Arc::new(pairs.iter().map(|p| p.0).collect::<Int64Array>());
        let divisors: ArrayRef = Arc::new(pairs.iter().map(|p| p.1).collect::<Int64Array>());
        let result = pmod_of::<Int64Type>(&dividends, &divisors, java_pmod).unwrap();
        let expected: Vec<i64> = pairs.iter().map(|p| p.2).collect();
        assert_eq!(result.as_primitive::<Int64Type>().values().to_vec(), expected);

        let shorts = |values: &[i16]| Arc::new(Int16Array::from(values.to_vec())) as ArrayRef;
        let (dividends, divisors) = (shorts(&[-128, -32768, 5]), shorts(&[-32768, -32768, -32768]));
        let args = ScalarFunctionArgs {
            args: vec![ColumnarValue::Array(Arc::clone(&dividends)), ColumnarValue::Array(Arc::clone(&divisors))],
            arg_fields: ["a", "n"].map(|name| Arc::new(Field::new(name, DataType::Int16, true))).to_vec(),
            number_rows: 3,
            return_field: Arc::new(Field::new("pmod", DataType::Int16, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let inner = ScalarUDF::from(datafusion_spark::function::math::modulus::SparkPmod::new());
        let ColumnarValue::Array(result) = java_or(&inner, args, [dividends, divisors]).unwrap() else {
            panic!("an array")
        };
        assert_eq!(result.as_primitive::<Int16Type>().values().to_vec(), [-128, 0, 5]);
    }

    /// Spark 4.3's answers: `pmod(-0.0D, 401822)` is -0.0, `pmod(-7.5D, 2)` 0.5, `pmod(7.5D, -2)`
    /// 1.5, `pmod(-7.5D, -2)` -1.5, and NaN stays NaN.
    #[test]
    fn floats_keep_javas_signs() {
        let pmod = |a: f64, n: f64| java_float_pmod(a, n);
        assert!(pmod(-0.0, 401822.0).is_sign_negative() && pmod(-0.0, 401822.0) == 0.0);
        assert_eq!(pmod(-7.5, 2.0), 0.5);
        assert_eq!(pmod(7.5, -2.0), 1.5);
        assert_eq!(pmod(-7.5, -2.0), -1.5);
        assert!(pmod(f64::NAN, 2.0).is_nan());
        assert_eq!(java_float_pmod(-7.5f32, 2.0), 0.5);
    }
}
