//! Spark's `avg` of a DECIMAL: a DECIMAL four digits wider, and four more of scale
//! (`decimal(p, s)` gives `decimal(min(38, p + 4), min(38, s + 4))`), the total divided by the
//! count rounded half up, where Spark's `avg` of `datafusion-spark` (which the session has)
//! makes every input a DOUBLE. Other inputs go to that `avg`. The partial state is Spark's: the
//! total as `decimal(min(38, p + 10), s)` and the count. A total past 38 digits fails with
//! NUMERIC_VALUE_OUT_OF_RANGE (22003), and so does an average past its type's precision (NULL
//! under legacy mode, `spark.sql.ansi.enabled = false`); rows leaving a sliding window frame
//! are taken back out.
//! A sliding frame of DOUBLEs, which that `avg` cannot take, is averaged as `frame_doubles`
//! says. `avg(DISTINCT …)`, which that `avg` refuses, is DataFusion's own, which averages a
//! DECIMAL's distinct values as Spark does.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, Signature, Volatility,
};

use super::few_group_totals::{FEW_GROUPS, few_group_totals};
use super::frame_doubles::{FrameDoubles, FrameResult};
use crate::config::EvalMode;
use crate::error::SqlError;
use crate::planner::decimal_division::{DecimalBound, divide_half_up};

const MAX_PRECISION: u8 = 38;

/// `avg` with Spark's DECIMAL average, over the session's `avg` (`inner`) for other inputs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkAvg {
    inner: AggregateUDF,
    /// DataFusion's own `avg`, which averages distinct values, where the inner one cannot.
    distinct: AggregateUDF,
    signature: Signature,
    mode: EvalMode,
}

/// `avg` as Spark's in `mode`, over `datafusion-spark`'s.
pub fn spark_avg(mode: EvalMode) -> AggregateUDF {
    AggregateUDF::new_from_impl(SparkAvg {
        inner: datafusion_spark::function::aggregate::avg().as_ref().clone(),
        distinct: avg_udaf().as_ref().clone(),
        signature: Signature::user_defined(Volatility::Immutable),
        mode,
    })
}

impl SparkAvg {
    /// How `avg` averages its input, when it averages it as a DECIMAL.
    fn decimal_input(&self, args: &AccumulatorArgs) -> Result<Option<Averaging>> {
        Ok(match args.exprs[0].data_type(args.schema)? {
            DataType::Decimal128(precision, scale) if !args.is_distinct => {
                Some(Averaging { mode: self.mode, ..Averaging::of(precision, scale) })
            }
            _ => None,
        })
    }
}

impl AggregateUDFImpl for SparkAvg {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// A DECIMAL stays one; other numbers become the DOUBLEs the inner `avg` averages.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [DataType::Decimal128(..)] => Ok(arg_types.to_vec()),
            [number] if number.is_numeric() || number.is_null() => Ok(vec![DataType::Float64]),
            other => Err(DataFusionError::Plan(format!("avg takes one number, not {other:?}"))),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Decimal128(precision, scale)] => Ok(Averaging::of(*precision, *scale).average_type()),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        match args.input_fields[0].data_type() {
            DataType::Decimal128(precision, scale) if !args.is_distinct => {
                let total = Averaging::of(*precision, *scale).total_type();
                Ok(vec![
                    Arc::new(Field::new(format_state_name(self.name(), "sum"), total, true)),
                    Arc::new(Field::new(format_state_name(self.name(), "count"), DataType::Int64, true)),
                ])
            }
            _ if args.is_distinct => self.distinct.state_fields(args),
            _ => self.inner.state_fields(args),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match self.decimal_input(&args)? {
            Some(averaging) => Ok(Box::new(DecimalAverage { averaging, group: GroupAverage::default() })),
            None if args.is_distinct => self.distinct.accumulator(args),
            None => self.inner.accumulator(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match self.decimal_input(&args)? {
            Some(averaging) => Ok(Box::new(DecimalAverages { averaging, groups: Vec::new() })),
            None => self.inner.create_groups_accumulator(args),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match self.decimal_input(&args)? {
            Some(_) => self.accumulator(args),
            // The inner `avg` cannot take rows back out of a frame.
            None => Ok(Box::new(FrameDoubles::new(FrameResult::Average))),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }
}

/// How totals become averages: the input's scale, the totals' precision, the average's type.
#[derive(Debug, Clone, Copy)]
struct Averaging {
    input_scale: i8,
    total_precision: u8,
    precision: u8,
    scale: i8,
    /// What an average past its precision gives: an error, or NULL.
    mode: EvalMode,
}

impl Averaging {
    /// Of `decimal(p, s)`: the average `decimal(p + 4, s + 4)`, the total `decimal(p + 10, s)`,
    /// each at most 38 digits.
    fn of(input_precision: u8, input_scale: i8) -> Self {
        let widen = |by: u8| (input_precision + by).min(MAX_PRECISION);
        let scale = (input_scale + 4).min(MAX_PRECISION as i8);
        Averaging { input_scale, total_precision: widen(10), precision: widen(4), scale, mode: EvalMode::Ansi }
    }

    fn average_type(&self) -> DataType {
        DataType::Decimal128(self.precision, self.scale)
    }

    fn total_type(&self) -> DataType {
        DataType::Decimal128(self.total_precision, self.input_scale)
    }

    fn average(&self, total: i128, count: i64) -> Result<Option<i128>> {
        if count <= 0 {
            return Ok(None);
        }
        let average = divide_half_up(total, i128::from(count), i32::from(self.scale) - i32::from(self.input_scale));
        match (DecimalBound::of(self.precision, self.scale).check(average), self.mode) {
            (Ok(()), _) => Ok(Some(average.as_i128())),
            (Err(_), EvalMode::Legacy) => Ok(None),
            (Err(e), EvalMode::Ansi) => Err(DataFusionError::External(Box::new(e))),
        }
    }

    fn totals(&self, totals: Decimal128Array) -> Result<Decimal128Array> {
        Ok(totals.with_precision_and_scale(self.total_precision, self.input_scale)?)
    }
}

fn out_of_range() -> DataFusionError {
    SqlError::new(
        "22003",
        "[NUMERIC_VALUE_OUT_OF_RANGE] the total of avg does not fit DECIMAL(38). If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error, and return NULL instead.",
    ).into()
}

/// One group's running total and count. The total is `lost` once it passed 128 bits under
/// legacy mode (or came from a partial total that had): its average is NULL. One 32-byte value
/// per group, so that adding to a group among many touches one cache line.
#[derive(Debug, Clone, Copy, Default)]
struct GroupAverage {
    total: i128,
    count: i64,
    lost: bool,
}

impl Averaging {
    /// Adds `value` (`None`: a partial total that was lost) and `count` rows to `group`; a total
    /// past 128 bits fails under ANSI mode and is lost under legacy mode.
    #[inline]
    fn add(&self, group: &mut GroupAverage, value: Option<i128>, count: i64) -> Result<()> {
        group.count += count;
        if group.lost {
            return Ok(());
        }
        match value.map(|value| group.total.checked_add(value)) {
            Some(Some(total)) => group.total = total,
            Some(None) if self.mode == EvalMode::Ansi => return Err(out_of_range()),
            _ => group.lost = true,
        }
        Ok(())
    }

    /// The partial total of `group`: NULL for no rows, or one lost.
    fn partial_total(group: &GroupAverage) -> Option<i128> {
        (group.count > 0 && !group.lost).then_some(group.total)
    }

    fn group_average(&self, group: &GroupAverage) -> Result<Option<i128>> {
        if group.lost { Ok(None) } else { self.average(group.total, group.count) }
    }
}

/// The rows a batch of input values or partial totals adds: one each for values; for partial
/// totals their counts, where a NULL total with rows is one that was lost, and one without
/// rows adds nothing.
fn rows_added(totals: &Decimal128Array, counts: Option<&Int64Array>, row: usize) -> Option<(Option<i128>, i64)> {
    let value = totals.is_valid(row).then(|| totals.value(row));
    match counts {
        None => value.map(|value| (Some(value), 1)),
        Some(counts) => {
            let count = counts.value(row);
            (value.is_some() || count > 0).then_some((value, count))
        }
    }
}

/// One group's average, for a window or an aggregate without groups.
#[derive(Debug)]
struct DecimalAverage {
    averaging: Averaging,
    group: GroupAverage,
}

impl DecimalAverage {
    /// Adds input values, or (with their `counts`) partial totals; `sign` -1 takes rows back out.
    fn add(&mut self, totals: &ArrayRef, counts: Option<&ArrayRef>, sign: i64) -> Result<()> {
        let totals = totals.as_primitive::<Decimal128Type>();
        let counts = counts.map(|c| c.as_primitive::<Int64Type>());
        for row in 0..totals.len() {
            if let Some((value, count)) = rows_added(totals, counts, row) {
                let value = value.map(|v| i128::from(sign) * v);
                self.averaging.add(&mut self.group, value, sign * count)?;
            }
        }
        Ok(())
    }
}

impl Accumulator for DecimalAverage {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], None, 1)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], None, -1)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(&states[0], Some(&states[1]), 1)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let Averaging { total_precision, input_scale, .. } = self.averaging;
        Ok(vec![
            ScalarValue::Decimal128(Averaging::partial_total(&self.group), total_precision, input_scale),
            ScalarValue::Int64(Some(self.group.count)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let Averaging { precision, scale, .. } = self.averaging;
        Ok(ScalarValue::Decimal128(self.averaging.group_average(&self.group)?, precision, scale))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// Many groups' totals and counts.
#[derive(Debug)]
struct DecimalAverages {
    averaging: Averaging,
    groups: Vec<GroupAverage>,
}

impl DecimalAverages {
    fn add(
        &mut self,
        totals: &ArrayRef,
        counts: Option<&ArrayRef>,
        groups: &[usize],
        filter: Option<&BooleanArray>,
        groups_total: usize,
    ) -> Result<()> {
        self.groups.resize(groups_total, GroupAverage::default());
        let totals = totals.as_primitive::<Decimal128Type>();
        if counts.is_none() && filter.is_none() && totals.null_count() == 0 {
            // Input values without NULLs, the common case: straight over the values, a batch's
            // total at a time where the groups are few.
            if groups_total > FEW_GROUPS {
                for (&group, &value) in groups.iter().zip(totals.values().iter()) {
                    self.averaging.add(&mut self.groups[group], Some(value), 1)?;
                }
                return Ok(());
            }
            let few = few_group_totals(totals.values(), groups);
            for (group, average) in self.groups.iter_mut().enumerate().filter(|(group, _)| few.rows[*group] > 0) {
                match few.totals[group].to_i128() {
                    Some(total) => self.averaging.add(average, Some(total), few.rows[group])?,
                    None if self.averaging.mode == EvalMode::Ansi => return Err(out_of_range()),
                    None => self.averaging.add(average, None, few.rows[group])?,
                }
            }
            return Ok(());
        }
        let counts = counts.map(|c| c.as_primitive::<Int64Type>());
        for (row, &group) in groups.iter().enumerate() {
            if filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            if let Some((value, count)) = rows_added(totals, counts, row) {
                self.averaging.add(&mut self.groups[group], value, count)?;
            }
        }
        Ok(())
    }
}

impl GroupsAccumulator for DecimalAverages {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(&values[0], None, group_indices, opt_filter, total_num_groups)
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.add(&values[0], Some(&values[1]), group_indices, None, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let groups = emit_to.take_needed(&mut self.groups);
        let averages =
            groups.iter().map(|group| self.averaging.group_average(group)).collect::<Result<Decimal128Array>>()?;
        let Averaging { precision, scale, .. } = self.averaging;
        Ok(Arc::new(averages.with_precision_and_scale(precision, scale)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let groups = emit_to.take_needed(&mut self.groups);
        let totals = self.averaging.totals(groups.iter().map(Averaging::partial_total).collect())?;
        let counts: Int64Array = groups.iter().map(|group| Some(group.count)).collect();
        Ok(vec![Arc::new(totals), Arc::new(counts)])
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let kept = |row: usize| values.is_valid(row) && opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        let totals: Decimal128Array = (0..values.len()).map(|row| kept(row).then(|| values.value(row))).collect();
        let counts: Int64Array = (0..values.len()).map(|row| Some(i64::from(kept(row)))).collect();
        Ok(vec![Arc::new(self.averaging.totals(totals)?), Arc::new(counts)])
    }

    fn size(&self) -> usize {
        self.groups.capacity() * size_of::<GroupAverage>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimals(values: &[Option<i128>], precision: u8, scale: i8) -> ArrayRef {
        Arc::new(Decimal128Array::from(values.to_vec()).with_precision_and_scale(precision, scale).unwrap())
    }

    fn averages(mode: EvalMode) -> DecimalAverages {
        DecimalAverages { averaging: Averaging { mode, ..Averaging::of(15, 2) }, groups: Vec::new() }
    }

    /// The average of positive `decimal(15, 2)` values as `decimal(19, 6)`, rounded half up,
    /// worked out in whole numbers of millionths.
    fn expected_average(values: &[i128]) -> i128 {
        let (total, count) = (values.iter().sum::<i128>() * 10_000, values.len() as i128);
        (2 * total + count) / (2 * count)
    }

    #[test]
    fn groups_average_their_values_with_and_without_nulls_and_through_partial_totals() {
        let values: Vec<i128> = (0..3000).map(|i| (i * 7919) % 100_003 + 1).collect();
        let groups: Vec<usize> = (0..3000).map(|i| (i * 31) % 7).collect();
        let expected: Vec<i128> = (0..7)
            .map(|g| {
                let mine: Vec<i128> = values.iter().zip(&groups).filter(|(_, x)| **x == g).map(|(v, _)| *v).collect();
                expected_average(&mine)
            })
            .collect();
        // All at once, without NULLs.
        let mut whole = averages(EvalMode::Ansi);
        let all: Vec<Option<i128>> = values.iter().copied().map(Some).collect();
        whole.update_batch(&[decimals(&all, 15, 2)], &groups, None, 7).unwrap();
        let result = whole.evaluate(EmitTo::All).unwrap();
        assert_eq!(result.data_type(), &DataType::Decimal128(19, 6));
        let result = result.as_primitive::<Decimal128Type>();
        assert_eq!(result.values().to_vec(), expected);
        // In two partial halves, each with a NULL that counts for nothing, merged.
        let mut merged = averages(EvalMode::Ansi);
        for half in [0..1500, 1500..3000] {
            let mut partial = averages(EvalMode::Ansi);
            let mut half_values: Vec<Option<i128>> = all[half.clone()].to_vec();
            let mut half_groups = groups[half].to_vec();
            half_values.push(None);
            half_groups.push(3);
            partial.update_batch(&[decimals(&half_values, 15, 2)], &half_groups, None, 7).unwrap();
            let state = partial.state(EmitTo::All).unwrap();
            assert_eq!(state[0].data_type(), &DataType::Decimal128(25, 2));
            merged.merge_batch(&state, &(0..7).collect::<Vec<_>>(), 7).unwrap();
        }
        let result = merged.evaluate(EmitTo::All).unwrap();
        assert_eq!(result.as_primitive::<Decimal128Type>().values().to_vec(), expected);
    }

    #[test]
    fn a_total_past_128_bits_fails_under_ansi_and_is_null_under_legacy_mode() {
        let huge = decimals(&[Some(i128::MAX / 2 + 1), Some(i128::MAX / 2 + 1), Some(5)], 38, 0);
        let groups = [0, 0, 1];
        let mut ansi = DecimalAverages { averaging: Averaging::of(38, 0), groups: Vec::new() };
        let error = ansi.update_batch(std::slice::from_ref(&huge), &groups, None, 2).unwrap_err();
        assert!(error.to_string().contains("NUMERIC_VALUE_OUT_OF_RANGE"), "{error}");
        let mut legacy = DecimalAverages {
            averaging: Averaging { mode: EvalMode::Legacy, ..Averaging::of(38, 0) },
            groups: Vec::new(),
        };
        legacy.update_batch(&[huge], &groups, None, 2).unwrap();
        let state = legacy.state(EmitTo::All).unwrap();
        // The lost total travels as NULL with its rows, and stays lost when merged.
        assert!(state[0].is_null(0));
        assert_eq!(state[1].as_primitive::<Int64Type>().values().to_vec(), vec![2, 1]);
        let mut merged = DecimalAverages {
            averaging: Averaging { mode: EvalMode::Legacy, ..Averaging::of(38, 0) },
            groups: Vec::new(),
        };
        merged.merge_batch(&state, &[0, 1], 2).unwrap();
        let result = merged.evaluate(EmitTo::All).unwrap();
        let result = result.as_primitive::<Decimal128Type>();
        assert!(result.is_null(0));
        assert_eq!(result.value(1), 5_0000);
    }
}
