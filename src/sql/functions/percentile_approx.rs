//! Spark's `percentile_approx(x, p [, accuracy])` (and `approx_percentile`), which DataFusion
//! lacks: a value of the group itself, of `x`'s type, the smallest whose rank reaches `p` of the
//! group's count (`QuantileSummaries.query`: rank `ceil(p * n)`; the least value for `p` at
//! most `1 / accuracy`, the greatest from `1 - 1 / accuracy`). Spark answers from a Greenwald-
//! Khanna summary, exact until a group passes about `accuracy / 2` values (5,000 by default)
//! and within `n / accuracy` ranks beyond; we keep the group's values and answer exactly, which
//! is within that bound too. The answer goes through a DOUBLE, as Spark's summary holds
//! DOUBLEs. The values are counted in `--memory-limit`. Where we differ: `p` must be one
//! constant number (Spark also takes an array of them), and a group holding NaN may rank it
//! elsewhere (Spark's summary compares NaN as neither below nor above a number).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, new_empty_array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, concat, filter, is_not_null, sort_to_indices};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;

use crate::planner::spark_casts::{nearest_doubles, shortest_decimal_text};

/// Spark's default accuracy, `ApproximatePercentile.DEFAULT_PERCENTILE_ACCURACY`.
const DEFAULT_ACCURACY: f64 = 10_000.0;

#[derive(Debug, PartialEq, Eq, Hash)]
struct PercentileApprox {
    signature: Signature,
    aliases: Vec<String>,
}

pub fn spark_percentile_approx() -> AggregateUDF {
    AggregateUDF::new_from_impl(PercentileApprox {
        // The value, the percentage, and perhaps the accuracy.
        signature: Signature::one_of(vec![TypeSignature::Any(2), TypeSignature::Any(3)], Volatility::Immutable),
        aliases: vec!["approx_percentile".to_string()],
    })
}

/// A constant argument of `function` as a number, or a planning error naming it.
pub(super) fn constant(expr: Option<&Arc<dyn PhysicalExpr>>, function: &str, what: &str) -> Result<Option<f64>> {
    let Some(expr) = expr else { return Ok(None) };
    let literal = expr
        .downcast_ref::<Literal>()
        .ok_or_else(|| DataFusionError::Plan(format!("the {what} of {function} must be a constant")))?;
    match literal.value().cast_to(&DataType::Float64)? {
        ScalarValue::Float64(Some(value)) => Ok(Some(value)),
        _ => Err(DataFusionError::Plan(format!("the {what} of {function} must be a number"))),
    }
}

/// The percentage of `function`, a constant from 0 to 1.
pub(super) fn percentage(expr: Option<&Arc<dyn PhysicalExpr>>, function: &str) -> Result<f64> {
    let percentage = constant(expr, function, "percentage")?.unwrap_or(f64::NAN);
    if !(0.0..=1.0).contains(&percentage) {
        return Err(DataFusionError::Plan(format!("the percentage of {function} must be between 0.0 and 1.0")));
    }
    Ok(percentage)
}

impl AggregateUDFImpl for PercentileApprox {
    fn name(&self) -> &str {
        "percentile_approx"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let item = Field::new_list_field(args.input_fields[0].data_type().clone(), true);
        Ok(vec![Arc::new(Field::new_list(format_state_name(args.name, "values"), item, true))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let percentage = percentage(args.exprs.get(1), "percentile_approx")?;
        let accuracy = constant(args.exprs.get(2), "percentile_approx", "accuracy")?.unwrap_or(DEFAULT_ACCURACY);
        if accuracy <= 0.0 {
            return Err(DataFusionError::Plan("the accuracy of percentile_approx must be positive".to_string()));
        }
        let data_type = args.expr_fields[0].data_type().clone();
        Ok(Box::new(Values::new(data_type, move |values: &ArrayRef| ranked(values, percentage, 1.0 / accuracy))))
    }
}

/// The value of the group at `percentage`, as `QuantileSummaries.query` finds it.
fn ranked(values: &ArrayRef, percentage: f64, relative_error: f64) -> Result<ScalarValue> {
    let count = values.len();
    let order = sort_to_indices(values, None, None)?;
    let rank = if percentage <= relative_error {
        1
    } else if percentage >= 1.0 - relative_error {
        count
    } else {
        ((percentage * count as f64).ceil() as usize).clamp(1, count)
    };
    let value = values.slice(order.value(rank - 1) as usize, 1);
    ScalarValue::try_from_array(&through_double(&value)?, 0)
}

/// `value` as Spark gives it back: its summary holds DOUBLEs, so a DECIMAL comes back as
/// `Decimal(d)` of its nearest DOUBLE `d`, that DOUBLE's shortest decimal text rounded to its
/// scale (NULL where that rounding passes its precision), and a BIGINT or TIMESTAMP past 2^53
/// comes back to the nearest DOUBLE.
fn through_double(value: &ArrayRef) -> Result<ArrayRef> {
    Ok(match value.data_type() {
        DataType::Decimal128(..) => cast(&shortest_decimal_text(&nearest_doubles(value)?), value.data_type())?,
        DataType::Int64 | DataType::Timestamp(..) => {
            let wide = cast(value, &DataType::Int64)?;
            let rounded: Int64Array = wide.as_primitive::<Int64Type>().unary(|v| v as f64 as i64);
            cast(&(Arc::new(rounded) as ArrayRef), value.data_type())?
        }
        _ => Arc::clone(value),
    })
}

/// A group's non-NULL values, kept to be ranked at the end by `rank`, which takes at least
/// one value.
pub(super) struct Values<Rank> {
    rank: Rank,
    data_type: DataType,
    values: Vec<ArrayRef>,
    bytes: usize,
}

impl<Rank> std::fmt::Debug for Values<Rank> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Values").field("data_type", &self.data_type).field("bytes", &self.bytes).finish()
    }
}

impl<Rank: Fn(&ArrayRef) -> Result<ScalarValue>> Values<Rank> {
    pub(super) fn new(data_type: DataType, rank: Rank) -> Self {
        Values { rank, data_type, values: Vec::new(), bytes: 0 }
    }

    fn keep(&mut self, values: &ArrayRef) {
        let non_null = is_not_null(values).and_then(|valid| filter(values, &valid));
        if let Ok(values) = non_null
            && !values.is_empty()
        {
            self.bytes += values.get_array_memory_size();
            self.values.push(values);
        }
    }

    fn all(&self) -> Result<ArrayRef> {
        let parts: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        match parts.is_empty() {
            true => Ok(new_empty_array(&self.data_type)),
            false => Ok(concat(&parts)?),
        }
    }
}

impl<Rank: Fn(&ArrayRef) -> Result<ScalarValue> + Send + Sync + 'static> Accumulator for Values<Rank> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.keep(&values[0]);
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: &ListArray = states[0].as_list();
        for values in lists.iter().flatten() {
            self.keep(&values);
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = self.all()?;
        let offsets = OffsetBuffer::from_lengths([values.len()]);
        let item = Arc::new(Field::new_list_field(self.data_type.clone(), true));
        Ok(vec![ScalarValue::List(Arc::new(ListArray::new(item, offsets, values, None)))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let values = self.all()?;
        match values.is_empty() {
            true => ScalarValue::try_from(&self.data_type),
            false => (self.rank)(&values),
        }
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.bytes
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Decimal128Array, Int32Array};
    use datafusion::arrow::datatypes::Decimal128Type;

    use super::*;

    fn rank_of(percentage: f64, values: &[Option<i32>]) -> ScalarValue {
        let mut group = Values::new(DataType::Int32, move |values: &ArrayRef| ranked(values, percentage, 1e-4));
        group.update_batch(&[Arc::new(Int32Array::from(values.to_vec()))]).unwrap();
        group.evaluate().unwrap()
    }

    /// The value of rank ceil(p * n) among the non-NULL values, the least for p = 0, NULL for
    /// none: of 10, 20, 30, 40, p = 0.5 gives 20 and p = 0.51 gives 30.
    #[test]
    fn the_value_at_the_percentages_rank() {
        let values = [Some(40), None, Some(10), Some(30), Some(20)];
        for (percentage, expected) in [(0.0, 10), (0.25, 10), (0.5, 20), (0.51, 30), (1.0, 40)] {
            assert_eq!(rank_of(percentage, &values), ScalarValue::Int32(Some(expected)), "{percentage}");
        }
        assert_eq!(rank_of(0.5, &[None]), ScalarValue::Int32(None));
    }

    /// A DECIMAL comes back as Spark 4.3 answered `percentile_approx` of 0.000071722553723267840000
    /// (a DECIMAL(38, 24)): the DOUBLE's shortest digits, not its binary expansion
    /// (0.000071722553723267842048).
    #[test]
    fn a_decimal_comes_back_as_its_doubles_shortest_digits() {
        let decimals = Decimal128Array::from(vec![Some(71722553723267840000), None]).with_precision_and_scale(38, 24);
        let value: ArrayRef = Arc::new(decimals.unwrap());
        let back = through_double(&value).unwrap();
        assert_eq!(back.data_type(), &DataType::Decimal128(38, 24));
        assert_eq!(
            back.as_primitive::<Decimal128Type>().iter().collect::<Vec<_>>(),
            [Some(71722553723267840000), None]
        );
    }
}
