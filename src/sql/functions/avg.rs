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
            Some(averaging) => Ok(Box::new(DecimalAverage { averaging, total: Some(0), count: 0 })),
            None if args.is_distinct => self.distinct.accumulator(args),
            None => self.inner.accumulator(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match self.decimal_input(&args)? {
            Some(averaging) => Ok(Box::new(DecimalAverages { averaging, totals: Vec::new(), counts: Vec::new() })),
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

impl Averaging {
    /// `total` (`None` once past 128 bits, under legacy mode) with `value` added.
    fn added(&self, total: Option<i128>, value: Option<i128>) -> Result<Option<i128>> {
        match (total, value.map(|v| total.map(|t| t.checked_add(v)))) {
            (Some(_), Some(Some(Some(sum)))) => Ok(Some(sum)),
            (_, Some(Some(None))) if self.mode == EvalMode::Ansi => Err(out_of_range()),
            _ => Ok(None),
        }
    }
}

/// One group's total (`None` once it overflowed, under legacy mode) and count.
#[derive(Debug)]
struct DecimalAverage {
    averaging: Averaging,
    total: Option<i128>,
    count: i64,
}

impl DecimalAverage {
    /// Adds input values, or (with their `counts`) partial totals, where a NULL total of rows
    /// is one that overflowed.
    fn add(&mut self, totals: &ArrayRef, counts: Option<&ArrayRef>, sign: i128) -> Result<()> {
        let totals = totals.as_primitive::<Decimal128Type>();
        for row in 0..totals.len() {
            let count = counts.map_or(1, |c| c.as_primitive::<Int64Type>().value(row));
            if totals.is_null(row) && (counts.is_none() || count == 0) {
                continue;
            }
            let value = totals.is_valid(row).then(|| sign * totals.value(row));
            self.total = self.averaging.added(self.total, value)?;
            self.count += sign as i64 * count;
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
            ScalarValue::Decimal128(self.total.filter(|_| self.count > 0), total_precision, input_scale),
            ScalarValue::Int64(Some(self.count)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let Averaging { precision, scale, .. } = self.averaging;
        let average = match self.total {
            Some(total) => self.averaging.average(total, self.count)?,
            None => None,
        };
        Ok(ScalarValue::Decimal128(average, precision, scale))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// Many groups' totals (`None` once one overflowed, under legacy mode) and counts.
#[derive(Debug)]
struct DecimalAverages {
    averaging: Averaging,
    totals: Vec<Option<i128>>,
    counts: Vec<i64>,
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
        self.totals.resize(groups_total, Some(0));
        self.counts.resize(groups_total, 0);
        let totals = totals.as_primitive::<Decimal128Type>();
        let counts = counts.map(|c| c.as_primitive::<Int64Type>());
        for (row, &group) in groups.iter().enumerate() {
            let count = counts.map_or(1, |c| c.value(row));
            let overflowed = counts.is_some() && count > 0;
            if (totals.is_null(row) && !overflowed) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            let value = totals.is_valid(row).then(|| totals.value(row));
            self.totals[group] = self.averaging.added(self.totals[group], value)?;
            self.counts[group] += count;
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
        let (totals, counts) = (emit_to.take_needed(&mut self.totals), emit_to.take_needed(&mut self.counts));
        let averages = totals
            .into_iter()
            .zip(counts)
            .map(|(total, count)| match total {
                Some(total) => self.averaging.average(total, count),
                None => Ok(None),
            })
            .collect::<Result<Decimal128Array>>()?;
        let Averaging { precision, scale, .. } = self.averaging;
        Ok(Arc::new(averages.with_precision_and_scale(precision, scale)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (totals, counts) = (emit_to.take_needed(&mut self.totals), emit_to.take_needed(&mut self.counts));
        let totals = totals.iter().zip(&counts).map(|(total, count)| total.filter(|_| *count > 0));
        let totals = self.averaging.totals(totals.collect())?;
        Ok(vec![Arc::new(totals), Arc::new(Int64Array::from(counts))])
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let kept = |row: usize| values.is_valid(row) && opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        let totals: Decimal128Array = (0..values.len()).map(|row| kept(row).then(|| values.value(row))).collect();
        let counts: Int64Array = (0..values.len()).map(|row| Some(i64::from(kept(row)))).collect();
        Ok(vec![Arc::new(self.averaging.totals(totals)?), Arc::new(counts)])
    }

    fn size(&self) -> usize {
        self.totals.capacity() * size_of::<i128>() + self.counts.capacity() * size_of::<i64>()
    }
}
