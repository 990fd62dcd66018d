//! Spark's `max` and `min` over FLOAT and DOUBLE, over DataFusion's. Spark orders NaN above
//! every other value, and every NaN alike (`SQLOrderingUtil.compareDoubles`): `max` is NaN as
//! soon as one value is, and `min` only when all are. DataFusion's grouped `max` and `min` took
//! a NaN wherever a comparison with it failed, whatever came before, and started each group from
//! the type's finite extremes, so a group holding only -Infinity had the maximum -1.8e308.
//! Grouped, they are ours here; ungrouped and over window frames they are DataFusion's, whose
//! total order already puts NaN last, once a negative NaN is read as NaN. Other types are
//! DataFusion's throughout. Where we differ: -0.0 and 0.0 are equal to Spark, and its `max`
//! keeps the first of them; ours keeps 0.0 ungrouped and the first one grouped.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::arity::unary;
use datafusion::arrow::datatypes::{ArrowPrimitiveType, DataType, Float32Type, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, SetMonotonicity, Signature,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::prim_op::PrimitiveGroupsAccumulator;

/// DataFusion's `max` or `min` (`inner`), with Spark's order of FLOAT and DOUBLE values.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkExtremum {
    inner: AggregateUDF,
    /// `max`: the greatest value in Spark's order; `min`: the least.
    greatest: bool,
}

/// `max` or `min` (by `inner`'s name) as Spark's, over the session's DataFusion function.
pub fn spark_extremum(inner: Option<Arc<AggregateUDF>>) -> Option<AggregateUDF> {
    let inner = inner?.as_ref().clone();
    let greatest = match inner.name() {
        "max" => true,
        "min" => false,
        _ => return None,
    };
    Some(AggregateUDF::new_from_impl(SparkExtremum { inner, greatest }))
}

/// FLOAT and DOUBLE values.
trait Floating: Copy + PartialOrd {
    const NAN: Self;
    const NEG_INFINITY: Self;
    fn is_nan(self) -> bool;
}

impl Floating for f32 {
    const NAN: Self = f32::NAN;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Floating for f64 {
    const NAN: Self = f64::NAN;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// Spark's order of floating-point values: every NaN equal, and above everything else.
fn spark_order<F: Floating>(a: F, b: F) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl SparkExtremum {
    /// A groups accumulator that keeps, per group, the value `kept_over` the others, starting
    /// from the end of Spark's order the other values all pass.
    fn groups<T>(&self, data_type: &DataType) -> Box<dyn GroupsAccumulator>
    where
        T: ArrowPrimitiveType<Native: Floating> + Send,
    {
        let kept_over = if self.greatest { Ordering::Greater } else { Ordering::Less };
        let start = if self.greatest { T::Native::NEG_INFINITY } else { T::Native::NAN };
        Box::new(
            PrimitiveGroupsAccumulator::<T, _>::new(data_type, move |kept: &mut T::Native, value: T::Native| {
                if spark_order(value, *kept) == kept_over {
                    *kept = value;
                }
            })
            .with_starting_value(start),
        )
    }
}

impl AggregateUDFImpl for SparkExtremum {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneNaN(self.inner.accumulator(args)?)))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneNaN(self.inner.create_sliding_accumulator(args)?)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<datafusion::arrow::datatypes::FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match args.return_field.data_type() {
            data_type @ DataType::Float64 => Ok(self.groups::<Float64Type>(data_type)),
            data_type @ DataType::Float32 => Ok(self.groups::<Float32Type>(data_type)),
            _ => self.inner.create_groups_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.inner().order_sensitivity()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner.inner().is_descending()
    }

    fn value_from_stats(&self, statistics_args: &datafusion::logical_expr::StatisticsArgs) -> Option<ScalarValue> {
        self.inner.inner().value_from_stats(statistics_args)
    }

    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        self.inner.documentation()
    }
}

/// DataFusion's accumulator, given every NaN as the positive one, which its total order puts
/// above every other value, as Spark's order puts them all.
#[derive(Debug)]
struct OneNaN(Box<dyn Accumulator>);

/// `values` with each negative NaN made positive.
fn positive_nans(values: &[ArrayRef]) -> Vec<ArrayRef> {
    values
        .iter()
        .map(|array| match array.data_type() {
            DataType::Float64 => Arc::new(unary::<Float64Type, _, Float64Type>(array.as_primitive(), |v| {
                if v.is_nan() { f64::NAN } else { v }
            })) as ArrayRef,
            DataType::Float32 => Arc::new(unary::<Float32Type, _, Float32Type>(array.as_primitive(), |v| {
                if v.is_nan() { f32::NAN } else { v }
            })),
            _ => Arc::clone(array),
        })
        .collect()
}

impl Accumulator for OneNaN {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0.update_batch(&positive_nans(values))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0.retract_batch(&positive_nans(values))
    }

    fn supports_retract_batch(&self) -> bool {
        self.0.supports_retract_batch()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.0.merge_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.0.state()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.0.evaluate()
    }

    fn size(&self) -> usize {
        self.0.size()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, Float64Array};
    use datafusion::logical_expr::EmitTo;

    use super::*;

    fn grouped(greatest: bool, values: Vec<Option<f64>>, groups: Vec<usize>) -> Vec<Option<f64>> {
        let inner = datafusion::functions_aggregate::min_max::max_udaf().as_ref().clone();
        let extremum = SparkExtremum { inner, greatest };
        let mut accumulator = extremum.groups::<Float64Type>(&DataType::Float64);
        let count = groups.iter().max().map_or(0, |g| g + 1);
        let values: ArrayRef = Arc::new(Float64Array::from(values));
        accumulator.update_batch(&[values], &groups, None, count).unwrap();
        let result = accumulator.evaluate(EmitTo::All).unwrap();
        let result = result.as_primitive::<Float64Type>();
        (0..result.len()).map(|i| result.is_valid(i).then(|| result.value(i))).collect()
    }

    fn text(values: Vec<Option<f64>>) -> Vec<String> {
        values.into_iter().map(|v| v.map_or("NULL".into(), |v| v.to_string())).collect()
    }

    #[test]
    fn a_nan_is_the_greatest_value_of_a_group_wherever_it_comes() {
        let (nan, inf) = (f64::NAN, f64::INFINITY);
        let values = vec![Some(nan), Some(1.0), Some(1.0), Some(-nan), Some(-inf), Some(nan), None, Some(inf)];
        let groups = vec![0, 0, 1, 1, 2, 3, 3, 4];
        assert_eq!(text(grouped(true, values.clone(), groups.clone())), ["NaN", "NaN", "-inf", "NaN", "inf"]);
        assert_eq!(text(grouped(false, values, groups)), ["1", "1", "-inf", "NaN", "inf"]);
        assert_eq!(text(grouped(true, vec![None], vec![0])), ["NULL"]);
    }

    #[test]
    fn negative_nans_become_positive_for_datafusion_s_order() {
        let values: ArrayRef = Arc::new(Float64Array::from(vec![-f64::NAN, 2.0]));
        let positive = positive_nans(&[values]);
        let positive = positive[0].as_primitive::<Float64Type>();
        assert!(positive.value(0).is_nan() && positive.value(0).is_sign_positive());
        assert_eq!(positive.value(1), 2.0);
    }
}
