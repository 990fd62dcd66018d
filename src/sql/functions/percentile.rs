//! Spark's exact `percentile(x, p)`, and `median(x)` as `percentile(x, 0.5)` (the SQL rewrite
//! calls it so): a DOUBLE whatever the numbers are, between the two values around position
//! `p · (n - 1)` of the sorted group (`Percentile.getPercentile`), `lower + (position - ⌊position⌋)
//! · (higher - lower)`, and a value as it is where both are the same. DataFusion's
//! `percentile_cont` rounds the fraction to six digits, which differs in the last bits, and
//! gives NaN between two infinities. NaN sorts above every number. Where we differ: `p` must be
//! one constant number (Spark also takes an array of them, and a frequency column).

use std::cmp::Ordering;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility};

use super::percentile_approx::{Values, percentage};

#[derive(Debug, PartialEq, Eq, Hash)]
struct Percentile {
    signature: Signature,
}

pub fn spark_percentile() -> AggregateUDF {
    AggregateUDF::new_from_impl(Percentile { signature: Signature::user_defined(Volatility::Immutable) })
}

impl AggregateUDFImpl for Percentile {
    fn name(&self) -> &str {
        "percentile"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The numbers as DOUBLEs, and the percentage.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [value, percentage] if value.is_numeric() || value.is_null() => {
                Ok(vec![DataType::Float64, percentage.clone()])
            }
            _ => Err(DataFusionError::Plan("percentile takes a number and a percentage".to_string())),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let item = Field::new_list_field(DataType::Float64, true);
        Ok(vec![std::sync::Arc::new(Field::new_list(format_state_name(args.name, "values"), item, true))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let percentage = percentage(args.exprs.get(1), "percentile")?;
        Ok(Box::new(Values::new(DataType::Float64, move |values: &ArrayRef| {
            let mut sorted: Vec<f64> = values.as_primitive::<Float64Type>().values().to_vec();
            sorted.sort_unstable_by(spark_order);
            Ok(ScalarValue::Float64(Some(interpolated(&sorted, percentage))))
        })))
    }
}

/// Spark's order of DOUBLEs, NaN above every number, -0.0 equal to 0.0; between those two,
/// the order of Spark's hash map of a group's values, which puts -0.0 first while the group has
/// fewer than 359 distinct values (a table of at most 512 slots).
fn spark_order(a: &f64, b: &f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            let value = a.partial_cmp(b).unwrap_or(Ordering::Equal);
            value.then_with(|| b.is_sign_negative().cmp(&a.is_sign_negative()))
        }
    }
}

/// The value at `percentage` of `sorted`, which holds at least one value.
fn interpolated(sorted: &[f64], percentage: f64) -> f64 {
    let position = (sorted.len() - 1) as f64 * percentage;
    let (lower, higher) = (position.floor(), position.ceil());
    let (lower_value, higher_value) = (sorted[lower as usize], sorted[higher as usize]);
    // Spark compares its keys with Scala's `==`: -0.0 equals 0.0, and NaN is one key.
    if lower == higher || lower_value == higher_value || lower_value.to_bits() == higher_value.to_bits() {
        return lower_value;
    }
    lower_value + (position - lower) * (higher_value - lower_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4.3's answers: `percentile(x, p)` of 1, 2, 3, 4 at 0.5, 0.1 and 0.33; of 0.1 and
    /// 0.2 at 0.5; of 1.15, 2.35, 7.7 at 0.7; of two infinities at 0.25; of 0.1, 0.3, 0.7, 0.9,
    /// 5.5, 1e300 at 0.37; of the least and largest DOUBLE at 0.75.
    #[test]
    fn the_two_values_around_the_position_are_interpolated_as_sparks() {
        let cases: [(&[f64], f64, f64); 8] = [
            (&[0.1, 0.3, 0.7, 0.9, 5.5, 1e300], 0.37, 0.64),
            (&[-f64::MAX, f64::MAX], 0.75, f64::INFINITY),
            (&[1.0, 2.0, 3.0, 4.0], 0.5, 2.5),
            (&[1.0, 2.0, 3.0, 4.0], 0.1, 1.3),
            (&[1.0, 2.0, 3.0, 4.0], 0.33, 1.99),
            (&[0.1, 0.2], 0.5, 0.15000000000000002),
            (&[1.15, 2.35, 7.7], 0.7, 4.489999999999999),
            (&[f64::INFINITY, f64::INFINITY], 0.25, f64::INFINITY),
        ];
        for (values, percentage, expected) in cases {
            assert_eq!(interpolated(values, percentage), expected, "{values:?} at {percentage}");
        }
        let mut with_nan = [f64::NAN, 1.0];
        with_nan.sort_unstable_by(spark_order);
        assert_eq!(with_nan[0], 1.0, "NaN sorts last");
        assert!(interpolated(&with_nan, 0.5).is_nan());
        // Spark 4.3's `median` of 0.0 and -0.0 is -0.0.
        let mut zeros = [0.0, -0.0];
        zeros.sort_unstable_by(spark_order);
        let median = interpolated(&zeros, 0.5);
        assert!(median == 0.0 && median.is_sign_negative(), "{median}");
    }
}
