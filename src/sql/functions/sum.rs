//! Spark's `sum` and `try_sum` under ANSI mode, over DataFusion's `sum`.
//!
//! - A BIGINT total past BIGINT's range fails with ARITHMETIC_OVERFLOW (22003) at the step that
//!   leaves it, as Spark's `Math.addExact`; DataFusion's wraps around.
//! - A DECIMAL total is kept in 256 bits and only a result, or a partial total that leaves its
//!   partition, must fit its type (22003 otherwise). As in Spark, a
//!   running total may pass the precision and come back; DataFusion's wraps past 128 bits and
//!   returns more digits than its type declares. A partial total past 128 bits fails as
//!   ARITHMETIC_OVERFLOW, a result past its precision as NUMERIC_VALUE_OUT_OF_RANGE, as Spark's.
//! - `try_sum` gives NULL where `sum` fails.
//! - Under legacy mode (`spark.sql.ansi.enabled = false`), a BIGINT total wraps around, as
//!   Java's `+` does, and a DECIMAL one that does not fit is NULL, as in Spark.
//!
//! Other types (DOUBLE totals) are DataFusion's `sum`, but over a sliding window frame as
//! `frame_doubles` says. Its name, types and state are kept, so a query plans exactly as before.
//! Where we differ: Spark adds up a sliding window frame afresh for every row and so also fails
//! when a running total inside the frame passes BIGINT; we check each frame's total.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Int64Array, ListArray, make_array,
};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type, i256};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, SetMonotonicity, Signature,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::nulls::filtered_null_mask;

use super::few_group_totals::{FEW_GROUPS, few_group_totals};
use super::frame_doubles::{FrameDoubles, FrameResult};
use crate::config::EvalMode;
use crate::error::SqlError;
use crate::planner::decimal_division::DecimalBound;

/// DataFusion's `sum` (`inner`) with checked BIGINT and DECIMAL totals, failing or (as
/// `try_sum`) answering NULL where a total does not fit.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SparkSum {
    inner: AggregateUDF,
    name: String,
    on_overflow: OnOverflow,
}

/// What a total that does not fit its type gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OnOverflow {
    /// Spark's `sum`: an error.
    Fail,
    /// Spark's `try_sum`: NULL.
    Null,
    /// Spark's `sum` under legacy mode: a BIGINT wraps around, a DECIMAL is NULL.
    Wrap,
}

impl OnOverflow {
    /// Whether the partial state says that a total overflowed (NULL alone cannot tell it from
    /// no rows).
    fn tracked(self) -> bool {
        self != OnOverflow::Fail
    }

    /// A BIGINT total's step, in 64 bits as Java's `long`: out of range, it fails, is `None`
    /// (`try_sum`, whose total is then NULL) or wraps around (legacy mode).
    fn bigint_step(self, total: i64, value: i64) -> Result<Option<i64>> {
        match (total.checked_add(value), self) {
            (Some(sum), _) => Ok(Some(sum)),
            (None, OnOverflow::Wrap) => Ok(Some(total.wrapping_add(value))),
            (None, OnOverflow::Fail) => Err(external(Totals::bigint_overflow())),
            (None, OnOverflow::Null) => Ok(None),
        }
    }
}

/// `sum` as Spark's in `mode`, over DataFusion's `sum`.
pub fn spark_sum(mode: EvalMode) -> AggregateUDF {
    let inner = sum_udaf().as_ref().clone();
    let name = inner.name().to_owned();
    let on_overflow = match mode {
        EvalMode::Ansi => OnOverflow::Fail,
        EvalMode::Legacy => OnOverflow::Wrap,
    };
    AggregateUDF::new_from_impl(SparkSum { inner, name, on_overflow })
}

/// Spark's `try_sum`: `sum` with NULL for a total that does not fit.
pub fn spark_try_sum() -> AggregateUDF {
    let inner = sum_udaf().as_ref().clone();
    AggregateUDF::new_from_impl(SparkSum { inner, name: "try_sum".into(), on_overflow: OnOverflow::Null })
}

/// The totals this sum checks, and how.
#[derive(Debug, Clone, Copy)]
enum Totals {
    /// BIGINT: every step must stay in range.
    Bigint,
    /// DECIMAL: only a total that leaves the accumulator must fit.
    Decimal { precision: u8, scale: i8 },
}

impl Totals {
    fn of(args: &AccumulatorArgs) -> Option<Totals> {
        match args.return_field.data_type() {
            DataType::Int64 => Some(Totals::Bigint),
            DataType::Decimal128(precision, scale) => Some(Totals::Decimal { precision: *precision, scale: *scale }),
            _ => None,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Totals::Bigint => DataType::Int64,
            Totals::Decimal { precision, scale } => DataType::Decimal128(precision, scale),
        }
    }

    /// A BIGINT total wrapped around into BIGINT's range, as Java's `long` addition leaves it.
    fn wrapped(total: i256) -> i256 {
        i256::from_i128(i128::from(total.as_i128() as i64))
    }

    fn in_bigint(total: i256) -> Result<i256, SqlError> {
        match total.to_i128().and_then(|t| i64::try_from(t).ok()) {
            Some(_) => Ok(total),
            None => Err(Self::bigint_overflow()),
        }
    }

    fn bigint_overflow() -> SqlError {
        SqlError::new(
            "22003",
            "[ARITHMETIC_OVERFLOW] overflow. Use 'try_add' to tolerate overflow and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
        )
    }

    /// `total` as a result (`complete`) or as a partial total that leaves its partition, unless
    /// it does not fit. As in Spark, whose partial total is a DECIMAL of 16 bytes: one past 128
    /// bits fails as an overflow of the sum, and a result past its precision as a value out of
    /// its type's range.
    fn finish(self, total: i256, complete: bool, on_overflow: OnOverflow) -> Result<i128, SqlError> {
        match self {
            Totals::Bigint if on_overflow == OnOverflow::Wrap => Self::wrapped(total),
            Totals::Bigint => Self::in_bigint(total)?,
            Totals::Decimal { precision, scale } => {
                let Some(total) = total.to_i128() else {
                    return Err(SqlError::new(
                        "22003",
                        "[ARITHMETIC_OVERFLOW] Overflow in sum of decimals. Use 'try_sum' to tolerate overflow and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this error.",
                    ));
                };
                if complete {
                    DecimalBound::of(precision, scale).check(i256::from_i128(total))?;
                }
                i256::from_i128(total)
            }
        };
        Ok(total.as_i128())
    }

    /// The values of `array` (of this sum's input or state type) as 256-bit integers.
    fn column(self, array: &ArrayRef) -> Column<'_> {
        match self {
            Totals::Bigint => Column::Bigint(array.as_primitive::<Int64Type>()),
            Totals::Decimal { .. } => Column::Decimal(array.as_primitive::<Decimal128Type>()),
        }
    }

    fn array(self, totals: Vec<Option<i128>>) -> Result<ArrayRef> {
        Ok(match self {
            Totals::Bigint => Arc::new(totals.into_iter().map(|t| t.map(|t| t as i64)).collect::<Int64Array>()),
            Totals::Decimal { precision, scale } => {
                Arc::new(totals.into_iter().collect::<Decimal128Array>().with_precision_and_scale(precision, scale)?)
            }
        })
    }

    fn scalar(self, total: Option<i128>) -> ScalarValue {
        match self {
            Totals::Bigint => ScalarValue::Int64(total.map(|t| t as i64)),
            Totals::Decimal { precision, scale } => ScalarValue::Decimal128(total, precision, scale),
        }
    }
}

/// A BIGINT or DECIMAL column read as 256-bit integers.
enum Column<'a> {
    Bigint(&'a Int64Array),
    Decimal(&'a Decimal128Array),
}

impl Column<'_> {
    fn get(&self, row: usize) -> Option<i256> {
        match self {
            Column::Bigint(values) => values.is_valid(row).then(|| i256::from_i128(values.value(row).into())),
            Column::Decimal(values) => values.is_valid(row).then(|| i256::from_i128(values.value(row))),
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Bigint(values) => values.len(),
            Column::Decimal(values) => values.len(),
        }
    }
}

/// The exact total of DECIMAL values and their count: summed in 128 bits, each step past
/// 128 bits' range counted as a carry of 2^128 either way.
fn decimal_total(values: impl Iterator<Item = i128>) -> (i256, i64) {
    let (mut sum, mut carries, mut count) = (0i128, 0i128, 0i64);
    for value in values {
        let (next, carried) = sum.overflowing_add(value);
        if carried {
            carries += value.signum();
        }
        sum = next;
        count += 1;
    }
    (i256::from_i128(sum).wrapping_add(i256::from_parts(0, carries)), count)
}

fn external(error: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

impl SparkSum {
    /// The state of a non-DISTINCT `try_sum`: its total, and whether a step overflowed (which
    /// a NULL total alone cannot tell from no rows).
    fn overflow_field(&self, name: &str) -> FieldRef {
        Arc::new(Field::new(format_state_name(name, "overflowed"), DataType::Boolean, true))
    }
}

impl AggregateUDFImpl for SparkSum {
    fn name(&self) -> &str {
        &self.name
    }

    fn aliases(&self) -> &[String] {
        match self.on_overflow {
            OnOverflow::Fail | OnOverflow::Wrap => self.inner.aliases(),
            OnOverflow::Null => &[],
        }
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
        let Some(totals) = Totals::of(&args) else { return self.inner.accumulator(args) };
        Ok(if args.is_distinct {
            Box::new(DistinctTotal { totals, on_overflow: self.on_overflow, counts: HashMap::new() })
        } else {
            Box::new(Total::new(totals, self.on_overflow))
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let checked = matches!(args.return_field.data_type(), DataType::Int64 | DataType::Decimal128(..));
        let tracks_overflow = self.on_overflow.tracked() && !args.is_distinct && checked;
        let overflow_field = self.overflow_field(args.name);
        let mut fields = self.inner.state_fields(args)?;
        if tracks_overflow {
            fields.push(overflow_field);
        }
        Ok(fields)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match Totals::of(&args) {
            Some(totals) => Ok(Box::new(GroupTotals::new(totals, self.on_overflow))),
            None => self.inner.create_groups_accumulator(args),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match Totals::of(&args) {
            Some(totals) if !args.is_distinct => {
                Ok(Box::new(Total { only_total_checked: true, ..Total::new(totals, self.on_overflow) }))
            }
            Some(_) => self.accumulator(args),
            None if !args.is_distinct && args.return_field.data_type() == &DataType::Float64 => {
                Ok(Box::new(FrameDoubles::new(FrameResult::Sum)))
            }
            None => self.inner.create_sliding_accumulator(args),
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

    fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
        self.inner.documentation()
    }
}

/// One total: NULL until a value comes, and NULL again when a sliding frame retracts them all.
#[derive(Debug)]
struct Total {
    totals: Totals,
    on_overflow: OnOverflow,
    /// Only the total is checked, not each step: over a sliding frame, which adds rows before
    /// it retracts others, and over DISTINCT values, whose order is not the rows' (Spark's
    /// depends on its partitions; where it answers, its answer is the exact total).
    only_total_checked: bool,
    total: i256,
    count: i64,
    overflowed: bool,
}

impl Total {
    fn new(totals: Totals, on_overflow: OnOverflow) -> Self {
        Total { totals, on_overflow, only_total_checked: false, total: i256::ZERO, count: 0, overflowed: false }
    }

    /// Adds (`sign` 1) or takes away (`sign` −1) the values of `values` without checking a
    /// step: over a sliding frame and over DISTINCT values, where only the total is checked.
    fn add_unchecked(&mut self, values: &ArrayRef, sign: i64) {
        let values = self.totals.column(values);
        for value in (0..values.len()).filter_map(|row| values.get(row)) {
            self.count += sign;
            self.total = self.total.wrapping_add(if sign < 0 { value.wrapping_neg() } else { value });
        }
    }

    fn add(&mut self, values: &ArrayRef) -> Result<()> {
        if self.only_total_checked {
            self.add_unchecked(values, 1);
            return Ok(());
        }
        self.add_rows(&self.totals.column(values))
    }

    /// Rows coming in, each step checked: BIGINT steps in 64 bits, DECIMALs
    /// in 128 bits with their carries counted, rather than each value widened to 256 bits.
    fn add_rows(&mut self, values: &Column) -> Result<()> {
        match values {
            Column::Bigint(values) => match values.nulls().filter(|n| n.null_count() > 0) {
                None => self.add_bigints(values.values().iter().copied()),
                Some(nulls) => self.add_bigints(nulls.valid_indices().map(|row| values.value(row))),
            },
            Column::Decimal(values) => {
                let (total, count) = match values.nulls().filter(|n| n.null_count() > 0) {
                    None => decimal_total(values.values().iter().copied()),
                    Some(nulls) => decimal_total(nulls.valid_indices().map(|row| values.value(row))),
                };
                self.total = self.total.wrapping_add(total);
                self.count += count;
                Ok(())
            }
        }
    }

    /// BIGINT steps from a total that, as every step before it, stays in BIGINT's range.
    fn add_bigints(&mut self, values: impl Iterator<Item = i64>) -> Result<()> {
        let mut total = self.total.as_i128() as i64;
        for value in values {
            self.count += 1;
            match self.on_overflow.bigint_step(total, value)? {
                Some(sum) => total = sum,
                None => self.overflowed = true,
            }
        }
        self.total = i256::from_i128(total.into());
        Ok(())
    }

    /// The total, complete or partial, NULL for no values, or for one that does not fit under
    /// `try_sum`.
    fn result(&self, complete: bool) -> Result<Option<i128>> {
        if self.count == 0 || self.overflowed {
            return Ok(None);
        }
        match (self.totals.finish(self.total, complete, self.on_overflow), self.on_overflow) {
            (Ok(total), _) => Ok(Some(total)),
            (Err(error), OnOverflow::Fail) => Err(external(error)),
            (Err(_), OnOverflow::Null | OnOverflow::Wrap) => Ok(None),
        }
    }
}

impl Accumulator for Total {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0])
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add_unchecked(&values[0], -1);
        Ok(())
    }

    /// Only a frame's total is checked, so only such a total takes rows away.
    fn supports_retract_batch(&self) -> bool {
        self.only_total_checked
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(&states[0])?;
        if let Some(overflowed) = states.get(1) {
            self.overflowed |= overflowed.as_boolean().true_count() > 0;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let total = self.totals.scalar(self.result(false)?);
        Ok(match self.on_overflow.tracked() {
            false => vec![total],
            true => vec![total, ScalarValue::Boolean(Some(self.overflowed))],
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.totals.scalar(self.result(true)?))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// Many groups' totals.
#[derive(Debug)]
struct GroupTotals {
    totals: Totals,
    on_overflow: OnOverflow,
    sums: Vec<i256>,
    seen: Vec<bool>,
    overflowed: Vec<bool>,
}

impl GroupTotals {
    fn new(totals: Totals, on_overflow: OnOverflow) -> Self {
        GroupTotals { totals, on_overflow, sums: Vec::new(), seen: Vec::new(), overflowed: Vec::new() }
    }

    fn add(
        &mut self,
        values: &ArrayRef,
        groups: &[usize],
        filter: Option<&BooleanArray>,
        groups_total: usize,
    ) -> Result<()> {
        self.sums.resize(groups_total, i256::ZERO);
        self.seen.resize(groups_total, false);
        self.overflowed.resize(groups_total, false);
        let values = without_filtered(values, filter)?;
        match self.totals.column(&values) {
            Column::Decimal(decimals) => self.add_decimals(decimals, groups),
            Column::Bigint(bigints) => self.add_bigints(bigints, groups)?,
        }
        Ok(())
    }

    /// BIGINTs, each step checked in 64 bits from a total that, as every step before it, stays
    /// in BIGINT's range.
    fn add_bigints(&mut self, values: &Int64Array, groups: &[usize]) -> Result<()> {
        for (row, (&group, &value)) in groups.iter().zip(values.values().iter()).enumerate() {
            if values.is_null(row) {
                continue;
            }
            self.seen[group] = true;
            match self.on_overflow.bigint_step(self.sums[group].as_i128() as i64, value)? {
                Some(sum) => self.sums[group] = i256::from_i128(sum.into()),
                None => self.overflowed[group] = true,
            }
        }
        Ok(())
    }

    /// DECIMALs, where no step can fail: only a total leaving the accumulator is checked.
    fn add_decimals(&mut self, values: &Decimal128Array, groups: &[usize]) {
        if self.sums.len() <= FEW_GROUPS && values.null_count() == 0 {
            let few = few_group_totals(values.values(), groups);
            for (group, sum) in self.sums.iter_mut().enumerate().filter(|(group, _)| few.rows[*group] > 0) {
                self.seen[group] = true;
                *sum = sum.wrapping_add(few.totals[group]);
            }
            return;
        }
        let mut add = |group: usize, value: i128| {
            self.seen[group] = true;
            self.sums[group] = self.sums[group].wrapping_add(i256::from_i128(value));
        };
        match values.nulls() {
            None => groups.iter().zip(values.values().iter()).for_each(|(&group, &value)| add(group, value)),
            Some(nulls) => {
                for (row, (&group, &value)) in groups.iter().zip(values.values().iter()).enumerate() {
                    if nulls.is_valid(row) {
                        add(group, value);
                    }
                }
            }
        }
    }

    /// The first groups' totals (NULL for none, or under `try_sum` for one that does not fit),
    /// and whether each overflowed.
    fn take(&mut self, emit_to: EmitTo, complete: bool) -> Result<(ArrayRef, Vec<bool>)> {
        let sums = emit_to.take_needed(&mut self.sums);
        let seen = emit_to.take_needed(&mut self.seen);
        let mut overflowed = emit_to.take_needed(&mut self.overflowed);
        let mut totals = Vec::with_capacity(sums.len());
        for ((sum, seen), overflowed) in sums.into_iter().zip(seen).zip(&mut overflowed) {
            if !seen || *overflowed {
                totals.push(None);
                continue;
            }
            match (self.totals.finish(sum, complete, self.on_overflow), self.on_overflow) {
                (Ok(total), _) => totals.push(Some(total)),
                (Err(error), OnOverflow::Fail) => return Err(external(error)),
                (Err(_), OnOverflow::Null | OnOverflow::Wrap) => {
                    *overflowed = true;
                    totals.push(None);
                }
            }
        }
        Ok((self.totals.array(totals)?, overflowed))
    }
}

impl GroupsAccumulator for GroupTotals {
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
        self.add(&values[0], group_indices, None, total_num_groups)?;
        if let Some(overflowed) = values.get(1) {
            for (row, &group) in group_indices.iter().enumerate() {
                self.overflowed[group] |= overflowed.as_boolean().value(row);
            }
        }
        Ok(())
    }

    /// Each row its own group: its value, NULL where the filter drops it.
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let kept = without_filtered(&values[0], opt_filter)?;
        let column = self.totals.column(&kept);
        let totals = (0..column.len()).map(|row| column.get(row).map(|v| v.as_i128()));
        let mut state = vec![self.totals.array(totals.collect())?];
        if self.on_overflow.tracked() {
            state.push(Arc::new(BooleanArray::from(vec![false; column.len()])));
        }
        Ok(state)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(self.take(emit_to, true)?.0)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (totals, overflowed) = self.take(emit_to, false)?;
        Ok(match self.on_overflow.tracked() {
            false => vec![totals],
            true => vec![totals, Arc::new(BooleanArray::from(overflowed))],
        })
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i256>() + self.seen.capacity() + self.overflowed.capacity()
    }
}

/// `values` with the rows `filter` drops (false or NULL) as NULLs, which a sum skips.
fn without_filtered(values: &ArrayRef, filter: Option<&BooleanArray>) -> Result<ArrayRef> {
    if filter.is_none() {
        return Ok(Arc::clone(values));
    }
    let nulls = filtered_null_mask(filter, values);
    Ok(make_array(values.to_data().into_builder().nulls(nulls).build()?))
}

/// A DISTINCT total: how many times each value is in (a sliding frame retracts them).
#[derive(Debug)]
struct DistinctTotal {
    totals: Totals,
    on_overflow: OnOverflow,
    counts: HashMap<i128, usize>,
}

impl DistinctTotal {
    fn add(&mut self, values: &ArrayRef, retract: bool) {
        let values = self.totals.column(values);
        for value in (0..values.len()).filter_map(|row| values.get(row)) {
            let value = value.as_i128();
            if !retract {
                *self.counts.entry(value).or_default() += 1;
            } else if let Some(count) = self.counts.get_mut(&value) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(&value);
                }
            }
        }
    }
}

impl Accumulator for DistinctTotal {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], false);
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], true);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: &ListArray = states[0].as_list();
        for values in lists.iter().flatten() {
            self.add(&values, false);
        }
        Ok(())
    }

    /// The distinct values, as DataFusion's DISTINCT `sum` keeps them.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values: Vec<ScalarValue> = self.counts.keys().map(|v| self.totals.scalar(Some(*v))).collect();
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(&values, &self.totals.data_type()))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut total = Total { only_total_checked: true, ..Total::new(self.totals, self.on_overflow) };
        let values = self.totals.array(self.counts.keys().map(|v| Some(*v)).collect())?;
        total.add_unchecked(&values, 1);
        Ok(self.totals.scalar(total.result(true)?))
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.counts.capacity() * (size_of::<i128>() + size_of::<usize>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int64s(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn decimals(values: &[i128]) -> ArrayRef {
        Arc::new(Decimal128Array::from(values.to_vec()).with_precision_and_scale(38, 0).unwrap())
    }

    const DECIMAL_38: Totals = Totals::Decimal { precision: 38, scale: 0 };

    /// Spark 4.3: `sum` of 9223372036854775807 and 1 fails with ARITHMETIC_OVERFLOW; groups that
    /// stay in range, and groups of NULLs, answer as before.
    #[test]
    fn a_total_past_bigint_fails_and_others_add_up() {
        let mut groups = GroupTotals::new(Totals::Bigint, OnOverflow::Fail);
        groups.update_batch(&[int64s(&[Some(1), Some(2), None, Some(i64::MAX)])], &[0, 0, 1, 2], None, 3).unwrap();
        let totals = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(3), None, Some(i64::MAX)]);
        let error = groups.update_batch(&[int64s(&[Some(i64::MAX), Some(1)])], &[0, 0], None, 1).unwrap_err();
        assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] overflow. Use 'try_add'"), "{error}");

        let mut total = Total::new(Totals::Bigint, OnOverflow::Fail);
        total.update_batch(&[int64s(&[Some(i64::MIN), None])]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MIN)));
        assert!(total.merge_batch(&[int64s(&[Some(-1)])]).is_err());
    }

    /// Two DECIMAL(38)s of 10^38 - 1 pass 128 bits' range, and the third brings the total back:
    /// Spark answers 10^38 - 1. Without the third, both fail; `try_sum` gives NULL.
    #[test]
    fn a_decimal_total_may_pass_128_bits_and_come_back() {
        let largest = 10i128.pow(38) - 1;
        let mut total = Total::new(DECIMAL_38, OnOverflow::Fail);
        total.update_batch(&[decimals(&[largest, largest, -largest])]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Decimal128(Some(largest), 38, 0));

        let mut groups = GroupTotals::new(DECIMAL_38, OnOverflow::Fail);
        groups.update_batch(&[decimals(&[largest, largest, 1, largest])], &[0, 0, 1, 1], None, 2).unwrap();
        let error = groups.state(EmitTo::First(1)).unwrap_err();
        assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] Overflow in sum of decimals"), "{error}");
        let error = groups.evaluate(EmitTo::All).unwrap_err();
        assert!(error.to_string().contains("[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]"), "{error}");

        let mut tried = GroupTotals::new(DECIMAL_38, OnOverflow::Null);
        tried.update_batch(&[decimals(&[largest, largest, 1])], &[0, 0, 1], None, 2).unwrap();
        let totals = tried.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Decimal128Type>().iter().collect::<Vec<_>>(), [None, Some(1)]);
    }

    /// A total of many DECIMALs past 128 bits, NULLs among them, is the exact product of the
    /// value and the count of values, on the way up and back down.
    #[test]
    fn decimal_totals_count_their_carries_past_128_bits() {
        let largest = 10i128.pow(38) - 1;
        let values: Vec<Option<i128>> = (0..1000).map(|row| (row % 3 != 0).then_some(largest)).collect();
        let up: ArrayRef = Arc::new(Decimal128Array::from(values).with_precision_and_scale(38, 0).unwrap());
        let mut total = Total::new(DECIMAL_38, OnOverflow::Fail);
        total.update_batch(&[Arc::clone(&up)]).unwrap();
        assert_eq!(total.count, 666);
        assert_eq!(total.total, i256::from_i128(largest).wrapping_mul(i256::from_i128(666)));

        let down = decimals(&vec![-largest; 667]);
        total.update_batch(&[down]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Decimal128(Some(-largest), 38, 0));
    }

    /// Spark 4.3 checks each step of a BIGINT sum: 9223372036854775807, 1 and -5 fail under
    /// `sum`, give NULL under `try_sum`, and wrap around without ANSI mode, NULLs or not.
    #[test]
    fn a_bigint_step_out_of_range_counts_though_the_total_comes_back() {
        for values in
            [[Some(i64::MAX), Some(1), Some(-5)].to_vec(), [None, Some(i64::MAX), None, Some(1), Some(-5)].to_vec()]
        {
            let mut failing = Total::new(Totals::Bigint, OnOverflow::Fail);
            let error = failing.update_batch(&[int64s(&values)]).unwrap_err();
            assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] overflow"), "{error}");

            let mut tried = Total::new(Totals::Bigint, OnOverflow::Null);
            tried.update_batch(&[int64s(&values)]).unwrap();
            assert_eq!(tried.evaluate().unwrap(), ScalarValue::Int64(None));

            let mut wrapping = Total::new(Totals::Bigint, OnOverflow::Wrap);
            wrapping.update_batch(&[int64s(&values)]).unwrap();
            let wrapped = i64::MAX.wrapping_add(1).wrapping_add(-5);
            assert_eq!(wrapping.evaluate().unwrap(), ScalarValue::Int64(Some(wrapped)));
        }
    }

    /// The same steps in one group of several, beside a group that stays in range and one of
    /// NULLs: only the group whose step left BIGINT's range fails, is NULL or wraps around.
    #[test]
    fn a_grouped_bigint_step_out_of_range_counts_in_its_group() {
        let values = int64s(&[Some(i64::MAX), Some(2), None, Some(1), Some(3), Some(-5), None]);
        let groups = [0, 1, 2, 0, 1, 0, 1];
        let mut failing = GroupTotals::new(Totals::Bigint, OnOverflow::Fail);
        let error = failing.update_batch(&[Arc::clone(&values)], &groups, None, 3).unwrap_err();
        assert!(error.to_string().contains("[ARITHMETIC_OVERFLOW] overflow"), "{error}");

        let totals = |on_overflow| {
            let mut totals = GroupTotals::new(Totals::Bigint, on_overflow);
            totals.update_batch(&[Arc::clone(&values)], &groups, None, 3).unwrap();
            let totals = totals.evaluate(EmitTo::All).unwrap();
            totals.as_primitive::<Int64Type>().iter().collect::<Vec<_>>()
        };
        assert_eq!(totals(OnOverflow::Null), [None, Some(5), None]);
        let wrapped = i64::MAX.wrapping_add(1).wrapping_add(-5);
        assert_eq!(totals(OnOverflow::Wrap), [Some(wrapped), Some(5), None]);
    }

    /// `sum(x) FILTER (WHERE f)`: a row whose filter is false or NULL adds nothing, not even a
    /// step out of range, and a group whose rows are all filtered out is NULL.
    #[test]
    fn a_grouped_sum_skips_the_rows_its_filter_drops() {
        let filter = BooleanArray::from(vec![Some(true), Some(true), Some(false), None, Some(false)]);
        let mut groups = GroupTotals::new(Totals::Bigint, OnOverflow::Fail);
        let values = int64s(&[Some(5), Some(i64::MAX), Some(7), Some(1), Some(3)]);
        groups.update_batch(&[values], &[0, 1, 0, 1, 2], Some(&filter), 3).unwrap();
        let totals = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(5), Some(i64::MAX), None]);

        let mut groups = GroupTotals::new(DECIMAL_38, OnOverflow::Fail);
        groups.update_batch(&[decimals(&[5, 11, 7, 1, 3])], &[0, 1, 0, 1, 2], Some(&filter), 3).unwrap();
        let totals = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Decimal128Type>().iter().collect::<Vec<_>>(), [Some(5), Some(11), None]);

        // A filter without NULLs (GROUP BY CUBE's empty grouping set is one).
        let filter = BooleanArray::from(vec![true, false, true]);
        let mut groups = GroupTotals::new(Totals::Bigint, OnOverflow::Fail);
        groups.update_batch(&[int64s(&[Some(5), Some(i64::MAX), None])], &[0, 0, 1], Some(&filter), 2).unwrap();
        let totals = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(totals.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(5), None]);
    }

    /// A DISTINCT total adds each value once, checked as the others.
    #[test]
    fn a_distinct_total_counts_each_value_once() {
        let mut total = DistinctTotal { totals: Totals::Bigint, on_overflow: OnOverflow::Fail, counts: HashMap::new() };
        total.update_batch(&[int64s(&[Some(i64::MAX), Some(i64::MAX), None])]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MAX)));
        total.update_batch(&[int64s(&[Some(1)])]).unwrap();
        assert!(total.evaluate().is_err());
        total.retract_batch(&[int64s(&[Some(1)])]).unwrap();
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MAX)));
    }
}
