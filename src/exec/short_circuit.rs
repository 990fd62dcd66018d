//! Spark's `And` and `Or` as its generated code evaluates them: the right side only for the
//! rows the left side leaves undecided. `x <> 0 AND 10 / x > 1` never divides by zero in
//! Spark; DataFusion's `BinaryExpr` evaluates the right side over every row whenever the left
//! keeps more than a fifth of them, so an ANSI error from a row the left side ruled out failed
//! the whole query.
//!
//! Where we differ: a right side that cannot fail on any row (comparisons, null tests, `IN`,
//! `LIKE` over columns and literals) still runs over the whole batch when the left keeps more
//! than a fifth of it, as DataFusion's does, because selecting the rows would cost more than
//! evaluating it. The answers are the same either way.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use datafusion::arrow::compute::kernels::boolean::{and_kleene, or_kleene};
use datafusion::arrow::compute::{FilterBuilder, FilterPredicate};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr, TryCastExpr,
};
use datafusion::physical_expr::utils::collect_columns;

/// The share of a batch below which a right side that cannot fail is evaluated over the
/// undecided rows only, as DataFusion's pre-selection does.
const SELECTIVE: f64 = 0.2;

/// `left AND right` or `left OR right`, the right side evaluated only where the left side
/// does not decide the row (false for `AND`, true for `OR`).
#[derive(Debug, Clone, Eq)]
pub struct ShortCircuit {
    op: Operator,
    left: Arc<dyn PhysicalExpr>,
    right: Arc<dyn PhysicalExpr>,
    /// The input columns the right side reads: only these are selected for it.
    right_columns: Vec<usize>,
    right_can_fail: bool,
    /// The condition as Spark wrote it, where its conjuncts are evaluated in another order.
    shown: Option<Arc<dyn PhysicalExpr>>,
}

impl ShortCircuit {
    /// `None` unless `op` is `AND` or `OR`.
    pub fn new(op: Operator, left: Arc<dyn PhysicalExpr>, right: Arc<dyn PhysicalExpr>) -> Option<Self> {
        matches!(op, Operator::And | Operator::Or).then(|| Self::connect(op, left, right))
    }

    /// `left AND right`.
    pub fn and(left: Arc<dyn PhysicalExpr>, right: Arc<dyn PhysicalExpr>) -> Self {
        Self::connect(Operator::And, left, right)
    }

    fn connect(op: Operator, left: Arc<dyn PhysicalExpr>, right: Arc<dyn PhysicalExpr>) -> Self {
        let mut right_columns: Vec<usize> = collect_columns(&right).iter().map(Column::index).collect();
        right_columns.sort_unstable();
        let right_can_fail = can_fail(&right);
        ShortCircuit { op, left, right, right_columns, right_can_fail, shown: None }
    }

    /// This condition, printed as `shown`: the same conjuncts in Spark's order.
    pub fn shown_as(self, shown: Arc<dyn PhysicalExpr>) -> Self {
        ShortCircuit { shown: Some(shown), ..self }
    }

    /// The condition to print, when it is not this one's operands in order.
    pub fn shown(&self) -> Option<&Arc<dyn PhysicalExpr>> {
        self.shown.as_ref()
    }

    pub fn op(&self) -> &Operator {
        &self.op
    }

    pub fn left(&self) -> &Arc<dyn PhysicalExpr> {
        &self.left
    }

    pub fn right(&self) -> &Arc<dyn PhysicalExpr> {
        &self.right
    }

    /// The rows whose answer still depends on the right side: for `AND` those the left side
    /// found true or null, for `OR` those it found false or null.
    fn undecided(&self, left: &BooleanArray) -> BooleanBuffer {
        let values = left.values();
        match (self.op, left.nulls()) {
            (Operator::And, None) => values.clone(),
            (Operator::And, Some(nulls)) => values | &!nulls.inner(),
            (_, None) => !values,
            (_, Some(nulls)) => !&(values & nulls.inner()),
        }
    }

    /// The right side over the rows `undecided` keeps, each result in its row's place; the
    /// other rows hold `true`, which the left side's answer overrides.
    fn right_over(&self, batch: &RecordBatch, undecided: &BooleanBuffer, count: usize) -> Result<BooleanArray> {
        let selection = BooleanArray::new(undecided.clone(), None);
        let filter = FilterBuilder::new(&selection).optimize().build();
        let columns = batch
            .columns()
            .iter()
            .enumerate()
            .map(|(i, column)| match self.right_columns.binary_search(&i) {
                Ok(_) => select(&filter, column),
                // A column the right side does not read only needs the right length.
                Err(_) => Ok(column.slice(0, count)),
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(count));
        let selected = RecordBatch::try_new_with_options(batch.schema(), columns, &options)?;
        let right = self.right.evaluate(&selected)?.into_array(count)?;
        Ok(scatter(undecided, boolean(&right, self.op)?))
    }
}

/// An operand's values, which type coercion made booleans.
fn boolean(operand: &ArrayRef, op: Operator) -> Result<&BooleanArray> {
    match operand.as_boolean_opt() {
        Some(values) => Ok(values),
        None => internal_err!("{op} of a {} operand", operand.data_type()),
    }
}

fn select(filter: &FilterPredicate, column: &ArrayRef) -> Result<ArrayRef> {
    Ok(filter.filter(column.as_ref())?)
}

/// `values[k]` in the place of the `k`-th set bit of `positions`, `true` elsewhere.
fn scatter(positions: &BooleanBuffer, values: &BooleanArray) -> BooleanArray {
    let valid = values.nulls().map(|nulls| NullBuffer::new(deposit(positions, nulls.inner())));
    BooleanArray::new(deposit(positions, values.values()), valid)
}

/// The bits of `bits` in turn at the set bits of `positions`, set elsewhere: a word of
/// `positions` at a time, taking as many bits of `bits` as it has set.
fn deposit(positions: &BooleanBuffer, bits: &BooleanBuffer) -> BooleanBuffer {
    let words: Vec<u64> = bits.bit_chunks().iter_padded().collect();
    let mut taken = 0;
    let deposited: Buffer = positions
        .bit_chunks()
        .iter_padded()
        .map(|mask| {
            let mut chunk = bits_from(&words, taken);
            taken += mask.count_ones() as usize;
            let (mut word, mut rest) = (!mask, mask);
            while rest != 0 {
                let position = rest & rest.wrapping_neg();
                word |= position & (chunk & 1).wrapping_neg();
                chunk >>= 1;
                rest ^= position;
            }
            word
        })
        .collect();
    BooleanBuffer::new(deposited, 0, positions.len())
}

/// The 64 bits of `words` from bit `start` on, zeros past the end.
fn bits_from(words: &[u64], start: usize) -> u64 {
    let (index, shift) = (start / 64, start % 64);
    let low = words.get(index).map_or(0, |w| w >> shift);
    let high = match shift {
        0 => 0,
        _ => words.get(index + 1).map_or(0, |w| w << (64 - shift)),
    };
    low | high
}

/// Whether evaluating `expr` can raise an error on some row: anything but comparisons, null
/// tests, `NOT`, `IN`, `LIKE`, `AND` and `OR` over columns and literals is taken to.
pub fn can_fail(expr: &Arc<dyn PhysicalExpr>) -> bool {
    let infallible_node = match expr.downcast_ref::<BinaryExpr>() {
        Some(binary) => matches!(
            binary.op(),
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
                | Operator::IsDistinctFrom
                | Operator::IsNotDistinctFrom
                | Operator::And
                | Operator::Or
        ),
        None => {
            expr.is::<Column>()
                || expr.is::<Literal>()
                || expr.is::<ShortCircuit>()
                || expr.is::<IsNullExpr>()
                || expr.is::<IsNotNullExpr>()
                || expr.is::<NotExpr>()
                || expr.is::<InListExpr>()
                || expr.is::<LikeExpr>()
                || expr.is::<TryCastExpr>()
        }
    };
    !infallible_node || expr.children().into_iter().any(can_fail)
}

/// The conjuncts of `predicate`, through `AND`s of either kind.
pub fn split_conjunction(predicate: &Arc<dyn PhysicalExpr>) -> Vec<&Arc<dyn PhysicalExpr>> {
    let sides = match (predicate.downcast_ref::<ShortCircuit>(), predicate.downcast_ref::<BinaryExpr>()) {
        (Some(e), _) if e.op == Operator::And => Some((&e.left, &e.right)),
        (_, Some(e)) if *e.op() == Operator::And => Some((e.left(), e.right())),
        _ => None,
    };
    match sides {
        Some((left, right)) => {
            let mut conjuncts = split_conjunction(left);
            conjuncts.extend(split_conjunction(right));
            conjuncts
        }
        None => vec![predicate],
    }
}

impl PartialEq for ShortCircuit {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op && self.left.eq(&other.left) && self.right.eq(&other.right)
    }
}

impl Hash for ShortCircuit {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.op.hash(state);
        self.left.hash(state);
        self.right.hash(state);
    }
}

impl fmt::Display for ShortCircuit {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.shown {
            Some(shown) => write!(f, "{shown}"),
            None => write!(f, "({} {} {})", self.left, self.op, self.right),
        }
    }
}

impl PhysicalExpr for ShortCircuit {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        Ok(self.left.nullable(input_schema)? || self.right.nullable(input_schema)?)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let rows = batch.num_rows();
        let left = match self.left.evaluate(batch)? {
            ColumnarValue::Scalar(ScalarValue::Boolean(Some(value))) if value == (self.op == Operator::Or) => {
                return Ok(ColumnarValue::Scalar(ScalarValue::Boolean(Some(value))));
            }
            left => left.into_array(rows)?,
        };
        let left = boolean(&left, self.op)?;
        let undecided = self.undecided(left);
        let count = undecided.count_set_bits();
        if count == 0 {
            return Ok(ColumnarValue::Array(Arc::new(left.clone())));
        }
        let whole_batch = count == rows || (!self.right_can_fail && count as f64 > SELECTIVE * rows as f64);
        let right = match whole_batch {
            true => boolean(&self.right.evaluate(batch)?.into_array(rows)?, self.op)?.clone(),
            false => self.right_over(batch, &undecided, count)?,
        };
        let answer = match self.op {
            Operator::And => and_kleene(left, &right)?,
            _ => or_kleene(left, &right)?,
        };
        Ok(ColumnarValue::Array(Arc::new(answer)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.left, &self.right]
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn PhysicalExpr>>) -> Result<Arc<dyn PhysicalExpr>> {
        let (Some(right), Some(left)) = (children.pop(), children.pop()) else {
            return internal_err!("{} takes two operands", self.op);
        };
        if Arc::ptr_eq(&left, &self.left) && Arc::ptr_eq(&right, &self.right) {
            return Ok(self);
        }
        Ok(Arc::new(ShortCircuit::connect(self.op, left, right)))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some(shown) = &self.shown {
            return shown.fmt_sql(f);
        }
        write!(f, "(")?;
        self.left.fmt_sql(f)?;
        write!(f, " {} ", self.op)?;
        self.right.fmt_sql(f)?;
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{CastExpr, binary, col, lit};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn evaluated(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<BooleanArray> {
        Ok(expr.evaluate(batch)?.into_array(batch.num_rows())?.as_boolean().clone())
    }

    #[test]
    fn a_right_side_that_can_fail_sees_only_the_rows_the_left_leaves_undecided() {
        let xs: Vec<i64> = (0..10).collect();
        let input = batch(vec![("x", Arc::new(Int64Array::from(xs.clone())) as ArrayRef)]);
        let schema = input.schema();
        let x = || col("x", &schema).unwrap();
        let compare = |op, value: i64| binary(x(), op, lit(value), &schema).unwrap();
        // 10 / x > n: an integer division, which fails on a zero divisor.
        let quotient_above = |n: i64| {
            let quotient = binary(lit(10i64), Operator::Divide, x(), &schema).unwrap();
            binary(quotient, Operator::Gt, lit(n), &schema).unwrap()
        };
        assert!(
            evaluated(&binary(compare(Operator::NotEq, 0), Operator::And, quotient_above(1), &schema).unwrap(), &input)
                .is_err()
        );

        let and = Arc::new(ShortCircuit::new(Operator::And, compare(Operator::NotEq, 0), quotient_above(1)).unwrap())
            as Arc<dyn PhysicalExpr>;
        let expected: Vec<bool> = xs.iter().map(|&x| x != 0 && 10 / x > 1).collect();
        assert_eq!(evaluated(&and, &input).unwrap(), BooleanArray::from(expected));

        let or = Arc::new(ShortCircuit::new(Operator::Or, compare(Operator::Eq, 0), quotient_above(2)).unwrap())
            as Arc<dyn PhysicalExpr>;
        let expected: Vec<bool> = xs.iter().map(|&x| x == 0 || 10 / x > 2).collect();
        assert_eq!(evaluated(&or, &input).unwrap(), BooleanArray::from(expected));
    }

    /// Booleans with nulls, from a fixed sequence: about `true_share` of the non-null ones true.
    fn booleans(len: usize, seed: u64, true_share: f64) -> BooleanArray {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        (0..len).map(|_| if next() < 0.1 { None } else { Some(next() < true_share) }).collect()
    }

    #[test]
    fn answers_are_three_valued_and_or_over_nulls_whichever_rows_are_selected() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Boolean, true),
            Field::new("b", DataType::Boolean, true),
        ]));
        let a = || col("a", &schema).unwrap();
        let b = || col("b", &schema).unwrap();
        // A cast counts as able to fail, so that side is evaluated over the selected rows only.
        let cast_b = || Arc::new(CastExpr::new(b(), DataType::Boolean, None)) as Arc<dyn PhysicalExpr>;
        for (seed, true_share) in [(1, 0.05), (2, 0.5), (3, 0.95), (4, 0.0), (5, 1.0)] {
            let (left, right) = (booleans(1000, seed, true_share), booleans(1000, seed + 100, 0.5));
            let input = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(left.clone()) as ArrayRef, Arc::new(right.clone()) as ArrayRef],
            )
            .unwrap();
            for (op, expected) in
                [(Operator::And, and_kleene(&left, &right).unwrap()), (Operator::Or, or_kleene(&left, &right).unwrap())]
            {
                for right_side in [b(), cast_b()] {
                    let lazy = Arc::new(ShortCircuit::new(op, a(), right_side).unwrap()) as Arc<dyn PhysicalExpr>;
                    assert_eq!(evaluated(&lazy, &input).unwrap(), expected, "{op} with a true share of {true_share}");
                }
            }
        }
    }

    #[test]
    fn scattered_values_land_on_the_set_positions_in_turn() {
        for (len, seed) in [(1, 1), (63, 2), (64, 3), (65, 4), (1000, 5), (4099, 6)] {
            let positions = booleans(len, seed, 0.3).values().clone();
            let selected = positions.count_set_bits();
            // Values that start mid-word, as a slice of a longer array does.
            let values = booleans(selected + 7, seed + 50, 0.5).slice(7, selected);
            let mut taken = 0;
            let expected: BooleanArray = (0..len)
                .map(|row| match positions.value(row) {
                    true => {
                        taken += 1;
                        values.is_valid(taken - 1).then(|| values.value(taken - 1))
                    }
                    false => Some(true),
                })
                .collect();
            assert_eq!(scatter(&positions, &values), expected, "{len} rows");
        }
    }

    #[test]
    fn conjuncts_are_split_through_either_kind_of_and() {
        let schema = Schema::new(vec![Field::new("a", DataType::Boolean, true)]);
        let a = || col("a", &schema).unwrap();
        let plain = binary(a(), Operator::And, lit(true), &schema).unwrap();
        let lazy = Arc::new(ShortCircuit::new(Operator::And, plain, lit(false)).unwrap()) as Arc<dyn PhysicalExpr>;
        let disjunction = Arc::new(ShortCircuit::new(Operator::Or, a(), lit(false)).unwrap()) as Arc<dyn PhysicalExpr>;
        assert_eq!(split_conjunction(&lazy).len(), 3);
        assert_eq!(split_conjunction(&disjunction).len(), 1);
    }
}
