//! Spark's `Covariance` and `PearsonCorrelation`: `covar_pop`, `covar_samp` and `corr`, over
//! DOUBLEs, updated and merged with Spark's own formulas (a running co-moment, as Welford's
//! method keeps a variance), so the answers agree to the last digits. DataFusion's add up
//! otherwise: the covariance of a constant and anything came out -1e-12, not 0, and a value
//! past DOUBLE's range gave NaN where Spark's give an infinity or 0. A pair with a NULL is left
//! out. NULL for no pairs, and where Spark 4 divides by zero (`spark.sql.legacy.statisticalAggregate`
//! off): a sample covariance or a correlation of one pair, a correlation with a side that does
//! not vary. Over a sliding window frame, each frame's pairs are taken afresh, as in Spark.

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility};

/// Which statistic a [`CoMoment`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Statistic {
    CovariancePop,
    CovarianceSamp,
    Correlation,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CoMoment {
    statistic: Statistic,
    signature: Signature,
}

/// The functions, to register on a session in place of DataFusion's.
pub fn spark_covariances() -> [AggregateUDF; 3] {
    [Statistic::CovariancePop, Statistic::CovarianceSamp, Statistic::Correlation].map(|statistic| {
        AggregateUDF::new_from_impl(CoMoment { statistic, signature: Signature::any(2, Volatility::Immutable) })
    })
}

const STATE: [&str; 6] = ["n", "x_avg", "y_avg", "ck", "x_mk", "y_mk"];

impl AggregateUDFImpl for CoMoment {
    fn name(&self) -> &str {
        match self.statistic {
            Statistic::CovariancePop => "covar_pop",
            Statistic::CovarianceSamp => "covar_samp",
            Statistic::Correlation => "corr",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, _: &[DataType]) -> Result<Vec<DataType>> {
        Ok(vec![DataType::Float64, DataType::Float64])
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(STATE
            .map(|part| Arc::new(Field::new(format_state_name(args.name, part), DataType::Float64, false)))
            .to_vec())
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CoMoments { statistic: self.statistic, ..CoMoments::default() }))
    }

    /// Over a sliding window frame, as Spark computes it: each frame's pairs afresh.
    fn create_sliding_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(FramePairs { statistic: self.statistic, pairs: VecDeque::new() }))
    }
}

/// `(x, y)` as DOUBLEs, each pair with a NULL left out.
fn pairs(values: &[ArrayRef]) -> Result<Vec<(f64, f64)>> {
    let (xs, ys) = (cast(&values[0], &DataType::Float64)?, cast(&values[1], &DataType::Float64)?);
    let pairs = xs.as_primitive::<Float64Type>().iter().zip(ys.as_primitive::<Float64Type>().iter());
    Ok(pairs.filter_map(|(x, y)| Some((x?, y?))).collect())
}

/// A group's count, means, co-moment `ck` and the second moments of each side.
#[derive(Debug, Clone, Copy)]
struct CoMoments {
    statistic: Statistic,
    n: f64,
    x_avg: f64,
    y_avg: f64,
    ck: f64,
    x_mk: f64,
    y_mk: f64,
}

impl Default for CoMoments {
    fn default() -> Self {
        CoMoments { statistic: Statistic::CovariancePop, n: 0.0, x_avg: 0.0, y_avg: 0.0, ck: 0.0, x_mk: 0.0, y_mk: 0.0 }
    }
}

impl CoMoments {
    /// Spark's `updateExpressions`.
    fn update(&mut self, x: f64, y: f64) {
        let n = self.n + 1.0;
        let (dx, dy) = (x - self.x_avg, y - self.y_avg);
        let (x_avg, y_avg) = (self.x_avg + dx / n, self.y_avg + dy / n);
        *self = CoMoments {
            n,
            x_avg,
            y_avg,
            ck: self.ck + dx * (y - y_avg),
            x_mk: self.x_mk + dx * (x - x_avg),
            y_mk: self.y_mk + dy * (y - y_avg),
            ..*self
        };
    }

    /// Spark's `mergeExpressions`; into no pairs, the other state as it is (see
    /// `central_moments`).
    fn merge(&mut self, other: CoMoments) {
        if self.n == 0.0 {
            *self = CoMoments { statistic: self.statistic, ..other };
            return;
        }
        let (n1, n2) = (self.n, other.n);
        let n = n1 + n2;
        let (dx, dy) = (other.x_avg - self.x_avg, other.y_avg - self.y_avg);
        let (dx_n, dy_n) = if n == 0.0 { (0.0, 0.0) } else { (dx / n, dy / n) };
        *self = CoMoments {
            n,
            x_avg: self.x_avg + dx_n * n2,
            y_avg: self.y_avg + dy_n * n2,
            ck: self.ck + other.ck + dx * dy_n * n1 * n2,
            x_mk: self.x_mk + other.x_mk + dx * dx_n * n1 * n2,
            y_mk: self.y_mk + other.y_mk + dy * dy_n * n1 * n2,
            ..*self
        };
    }

    fn result(&self) -> Option<f64> {
        match self.statistic {
            _ if self.n == 0.0 => None,
            Statistic::CovariancePop => Some(self.ck / self.n),
            Statistic::CovarianceSamp | Statistic::Correlation if self.n == 1.0 => None,
            Statistic::CovarianceSamp => Some(self.ck / (self.n - 1.0)),
            // A side that does not vary has no correlation, whatever the other holds.
            Statistic::Correlation if self.x_mk == 0.0 || self.y_mk == 0.0 => None,
            Statistic::Correlation => Some(self.ck / (self.x_mk * self.y_mk).sqrt()),
        }
    }
}

impl Accumulator for CoMoments {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        pairs(values)?.into_iter().for_each(|(x, y)| self.update(x, y));
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let [n, x_avg, y_avg, ck, x_mk, y_mk] = [0, 1, 2, 3, 4, 5].map(|i| states[i].as_primitive::<Float64Type>());
        for row in 0..n.len() {
            let part = |array: &Float64Array| array.value(row);
            self.merge(CoMoments {
                n: part(n),
                x_avg: part(x_avg),
                y_avg: part(y_avg),
                ck: part(ck),
                x_mk: part(x_mk),
                y_mk: part(y_mk),
                ..*self
            });
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok([self.n, self.x_avg, self.y_avg, self.ck, self.x_mk, self.y_mk]
            .map(|v| ScalarValue::Float64(Some(v)))
            .to_vec())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.result()))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// The pairs of one sliding frame, in row order; the rows leaving a frame are its first ones.
#[derive(Debug)]
struct FramePairs {
    statistic: Statistic,
    pairs: VecDeque<(f64, f64)>,
}

impl FramePairs {
    fn moments(&self) -> CoMoments {
        let mut moments = CoMoments { statistic: self.statistic, ..CoMoments::default() };
        self.pairs.iter().for_each(|&(x, y)| moments.update(x, y));
        moments
    }
}

impl Accumulator for FramePairs {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.pairs.extend(pairs(values)?);
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let leaving = pairs(values)?.len().min(self.pairs.len());
        self.pairs.drain(..leaving);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, _: &[ArrayRef]) -> Result<()> {
        Err(DataFusionError::Internal("a window frame's statistic is not merged".to_string()))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.moments().state()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.moments().result()))
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.pairs.capacity() * size_of::<(f64, f64)>()
    }
}
