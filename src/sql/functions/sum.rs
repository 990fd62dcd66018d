//! Spark's `sum` under ANSI mode: a BIGINT total past BIGINT's range fails with
//! ARITHMETIC_OVERFLOW (22003), where DataFusion's `sum` wraps around; a DECIMAL total its
//! result type's precision does not fit fails with NUMERIC_VALUE_OUT_OF_RANGE (22003), where
//! DataFusion's returns more digits than its type declares. As in Spark, only the result is
//! checked for DECIMALs: a running total may pass the precision and come back. Everything else
//! is DataFusion's `sum` (its name, types, state and the sums of other types), so a query plans
//! exactly as before. Where we differ: over a sliding window frame, and for DISTINCT, a BIGINT
//! total still wraps, and a DECIMAL running total past 128 bits wraps.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, FieldRef, Int64Type, i256};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, SetMonotonicity, Signature,
};

use crate::error::SqlError;
use crate::planner::decimal_division::DecimalBound;

/// DataFusion's `sum` (`inner`) with checked BIGINT totals.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkSum {
    inner: AggregateUDF,
}

/// `sum` as Spark's, over the session's DataFusion `sum`.
pub fn spark_sum(inner: Option<Arc<AggregateUDF>>) -> Option<AggregateUDF> {
    Some(AggregateUDF::new_from_impl(SparkSum { inner: inner?.as_ref().clone() }))
}

/// Whether the totals are BIGINTs, which this sum checks.
fn checked(args: &AccumulatorArgs) -> bool {
    !args.is_distinct && args.return_field.data_type() == &DataType::Int64
}

/// What DECIMAL totals must fit, whose results this sum checks.
fn decimal_result(args: &AccumulatorArgs) -> Option<DecimalBound> {
    match args.return_field.data_type() {
        DataType::Decimal128(precision, scale) => Some(DecimalBound::of(*precision, *scale)),
        _ => None,
    }
}

fn overflow() -> DataFusionError {
    DataFusionError::External(Box::new(SqlError::new(
        "22003",
        "[ARITHMETIC_OVERFLOW] overflow. Use 'try_add' to tolerate overflow and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
    )))
}

impl AggregateUDFImpl for SparkSum {
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
        if checked(&args) {
            return Ok(Box::new(CheckedSum::default()));
        }
        let bound = decimal_result(&args);
        Ok(DecimalInRange::checking(self.inner.accumulator(args)?, bound))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        if checked(&args) {
            return Ok(Box::new(CheckedGroupSums::default()));
        }
        let bound = decimal_result(&args);
        let inner = self.inner.create_groups_accumulator(args)?;
        Ok(match bound {
            Some(bound) => Box::new(DecimalsInRange { inner, bound }),
            None => inner,
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let bound = decimal_result(&args);
        Ok(DecimalInRange::checking(self.inner.create_sliding_accumulator(args)?, bound))
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.inner.reverse_udf()
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.inner().order_sensitivity()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }

    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        self.inner.documentation()
    }
}

/// The total of one group of rows, NULL until a value comes.
#[derive(Debug, Default)]
struct CheckedSum {
    total: Option<i64>,
}

impl CheckedSum {
    fn add(&mut self, values: &ArrayRef) -> Result<()> {
        let values = values.as_primitive::<Int64Type>();
        for value in values.iter().flatten() {
            self.total = Some(self.total.unwrap_or(0).checked_add(value).ok_or_else(overflow)?);
        }
        Ok(())
    }
}

impl Accumulator for CheckedSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(&states[0])
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Int64(self.total)])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(self.total))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// The totals of many groups, each NULL until a value comes.
#[derive(Debug, Default)]
struct CheckedGroupSums {
    totals: Vec<i64>,
    seen: Vec<bool>,
}

impl CheckedGroupSums {
    fn add(
        &mut self,
        values: &ArrayRef,
        groups: &[usize],
        filter: Option<&BooleanArray>,
        groups_total: usize,
    ) -> Result<()> {
        self.totals.resize(groups_total, 0);
        self.seen.resize(groups_total, false);
        let values = values.as_primitive::<Int64Type>();
        for (row, &group) in groups.iter().enumerate() {
            if values.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            let total = &mut self.totals[group];
            *total = total.checked_add(values.value(row)).ok_or_else(overflow)?;
            self.seen[group] = true;
        }
        Ok(())
    }

    fn take(&mut self, emit_to: EmitTo) -> ArrayRef {
        let totals = emit_to.take_needed(&mut self.totals);
        let seen = emit_to.take_needed(&mut self.seen);
        Arc::new(Int64Array::new(totals.into(), Some(NullBuffer::from(seen))))
    }
}

impl GroupsAccumulator for CheckedGroupSums {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(&values[0], group_indices, opt_filter, total_num_groups)
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.add(&values[0], group_indices, None, total_num_groups)
    }

    /// Each row its own group: its value, NULL where the filter drops it.
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let Some(filter) = opt_filter else { return Ok(vec![Arc::clone(&values[0])]) };
        let values = values[0].as_primitive::<Int64Type>();
        let kept: Int64Array =
            values.iter().zip(filter.iter()).map(|(v, keep)| v.filter(|_| keep == Some(true))).collect();
        Ok(vec![Arc::new(kept)])
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(self.take(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.take(emit_to)])
    }

    fn size(&self) -> usize {
        self.totals.capacity() * size_of::<i64>() + self.seen.capacity()
    }
}

/// Fails unless the result type holds `total`.
fn in_range(total: i128, bound: &DecimalBound) -> Result<()> {
    bound.check(i256::from_i128(total)).map_err(|e| DataFusionError::External(Box::new(e)))
}

/// One DECIMAL total, checked against its type when it is the result.
#[derive(Debug)]
struct DecimalInRange {
    inner: Box<dyn Accumulator>,
    bound: DecimalBound,
}

impl DecimalInRange {
    /// `inner`, its result checked when it is a DECIMAL within `bound`.
    fn checking(inner: Box<dyn Accumulator>, bound: Option<DecimalBound>) -> Box<dyn Accumulator> {
        match bound {
            Some(bound) => Box::new(DecimalInRange { inner, bound }),
            None => inner,
        }
    }
}

impl Accumulator for DecimalInRange {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let total = self.inner.evaluate()?;
        if let ScalarValue::Decimal128(Some(value), ..) = total {
            in_range(value, &self.bound)?;
        }
        Ok(total)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}

/// Many groups' DECIMAL totals, each checked against its type when it is a result.
struct DecimalsInRange {
    inner: Box<dyn GroupsAccumulator>,
    bound: DecimalBound,
}

impl GroupsAccumulator for DecimalsInRange {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner.update_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.inner.merge_batch(values, group_indices, total_num_groups)
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let totals = self.inner.evaluate(emit_to)?;
        for total in totals.as_primitive::<Decimal128Type>().iter().flatten() {
            in_range(total, &self.bound)?;
        }
        Ok(totals)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.inner.state(emit_to)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int64s(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    /// Spark 4.3: `sum` of 9223372036854775807 and 1 fails with ARITHMETIC_OVERFLOW; groups that
    /// stay in range, and groups of NULLs, answer as before.
    #[test]
    fn a_total_past_bigint_fails_and_others_add_up() {
        let mut groups = CheckedGroupSums::default();
        groups.update_batch(&[int64s(&[Some(1), Some(2), None, Some(i64::MAX)])], &[0, 0, 1, 2], None, 3).unwrap();
        let totals = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(3), None, Some(i64::MAX)]);
        let error = groups.update_batch(&[int64s(&[Some(i64::MAX), Some(1)])], &[0, 0], None, 1).unwrap_err();
        assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] overflow. Use 'try_add'"), "{error}");

        let mut total = CheckedSum::default();
        total.update_batch(&[int64s(&[Some(i64::MIN), None])]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MIN)));
        assert!(total.merge_batch(&[int64s(&[Some(-1)])]).is_err());
    }
}
