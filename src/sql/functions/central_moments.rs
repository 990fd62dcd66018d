//! Spark's `CentralMomentAgg` family: `skewness` and `kurtosis`, which DataFusion lacks, and
//! `var_pop`, `var_samp`, `stddev_pop` and `stddev`, whose DataFusion forms add up otherwise
//! (the variance of equal values came out 5e-29, not 0). DOUBLEs of a group's central moments,
//! updated and merged with Spark's own formulas, so the answers agree to the last digits. NULL
//! for no rows; NULL where Spark 4 divides by zero (`spark.sql.legacy.statisticalAggregate`
//! off): a sample statistic of one row, skewness and kurtosis of equal values.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility};

/// Which moment statistic a [`CentralMoment`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Statistic {
    Skewness,
    Kurtosis,
    VariancePop,
    VarianceSamp,
    StddevPop,
    StddevSamp,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CentralMoment {
    statistic: Statistic,
    signature: Signature,
    aliases: Vec<String>,
}

/// The family's functions, to register on a session.
pub fn spark_central_moments() -> [AggregateUDF; 6] {
    let statistics: [(Statistic, &[&str]); 6] = [
        (Statistic::Skewness, &[]),
        (Statistic::Kurtosis, &[]),
        (Statistic::VariancePop, &["var_population"]),
        (Statistic::VarianceSamp, &["var", "var_sample"]),
        (Statistic::StddevPop, &[]),
        (Statistic::StddevSamp, &["stddev_samp", "std"]),
    ];
    statistics.map(|(statistic, aliases)| {
        let signature = Signature::numeric(1, Volatility::Immutable);
        let aliases = aliases.iter().map(|a| a.to_string()).collect();
        AggregateUDF::new_from_impl(CentralMoment { statistic, signature, aliases })
    })
}

/// The state's parts, in Spark's buffer order.
const PARTS: [&str; 5] = ["n", "avg", "m2", "m3", "m4"];

impl AggregateUDFImpl for CentralMoment {
    fn name(&self) -> &str {
        match self.statistic {
            Statistic::Skewness => "skewness",
            Statistic::Kurtosis => "kurtosis",
            Statistic::VariancePop => "var_pop",
            Statistic::VarianceSamp => "var_samp",
            Statistic::StddevPop => "stddev_pop",
            Statistic::StddevSamp => "stddev",
        }
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, _: &[DataType]) -> Result<Vec<DataType>> {
        Ok(vec![DataType::Float64])
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(PARTS.map(|part| Arc::new(Field::new(format_state_name(args.name, part), DataType::Float64, true))).to_vec())
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Moments { statistic: self.statistic, n: 0.0, avg: 0.0, m2: 0.0, m3: 0.0, m4: 0.0 }))
    }
}

/// Spark's buffer: the count, the mean, and the sums of the 2nd, 3rd and 4th powers of the
/// deviations from it.
#[derive(Debug, Clone, Copy)]
struct Moments {
    statistic: Statistic,
    n: f64,
    avg: f64,
    m2: f64,
    m3: f64,
    m4: f64,
}

impl Moments {
    /// Spark's `updateExpressions`: each moment from the one below it, already updated.
    fn update(&mut self, x: f64) {
        let n = self.n + 1.0;
        let delta = x - self.avg;
        let delta_n = delta / n;
        let m2 = self.m2 + delta * (delta - delta_n);
        let (delta2, delta_n2) = (delta * delta, delta_n * delta_n);
        let m3 = self.m3 - 3.0 * delta_n * m2 + delta * (delta2 - delta_n2);
        let m4 = self.m4 - 4.0 * delta_n * m3 - 6.0 * delta_n2 * m2 + delta * (delta * delta2 - delta_n * delta_n2);
        *self = Moments { n, avg: self.avg + delta_n, m2, m3, m4, ..*self };
    }

    /// Spark's `mergeExpressions`; into no rows, the other state as it is, where Spark's
    /// formula gives the other's mean as `mean / n · n`, which may lose its last bit (and then
    /// the variance of equal values is not 0) depending on how the rows were split.
    fn merge(&mut self, other: Moments) {
        if self.n == 0.0 {
            *self = Moments { statistic: self.statistic, ..other };
            return;
        }
        let (n1, n2) = (self.n, other.n);
        let n = n1 + n2;
        let delta = other.avg - self.avg;
        let delta_n = if n == 0.0 { 0.0 } else { delta / n };
        let m2 = self.m2 + other.m2 + delta * delta_n * n1 * n2;
        let m3 = self.m3
            + other.m3
            + delta_n * delta_n * delta * n1 * n2 * (n1 - n2)
            + 3.0 * delta_n * (n1 * other.m2 - n2 * self.m2);
        let m4 = self.m4
            + other.m4
            + delta_n * delta_n * delta_n * delta * n1 * n2 * (n1 * n1 - n1 * n2 + n2 * n2)
            + 6.0 * delta_n * delta_n * (n1 * n1 * other.m2 + n2 * n2 * self.m2)
            + 4.0 * delta_n * (n1 * other.m3 - n2 * self.m3);
        *self = Moments { n, avg: self.avg + delta_n * n2, m2, m3, m4, ..*self };
    }

    fn result(&self) -> Option<f64> {
        let (n, m2) = (self.n, self.m2);
        let sample = matches!(self.statistic, Statistic::VarianceSamp | Statistic::StddevSamp);
        let higher = matches!(self.statistic, Statistic::Skewness | Statistic::Kurtosis);
        if n == 0.0 || (sample && n == 1.0) || (higher && m2 == 0.0) {
            return None;
        }
        Some(match self.statistic {
            Statistic::Skewness => n.sqrt() * self.m3 / (m2 * m2 * m2).sqrt(),
            Statistic::Kurtosis => n * self.m4 / (m2 * m2) - 3.0,
            Statistic::VariancePop => m2 / n,
            Statistic::VarianceSamp => m2 / (n - 1.0),
            Statistic::StddevPop => (m2 / n).sqrt(),
            Statistic::StddevSamp => (m2 / (n - 1.0)).sqrt(),
        })
    }
}

impl Accumulator for Moments {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = cast(&values[0], &DataType::Float64)?;
        values.as_primitive::<Float64Type>().iter().flatten().for_each(|x| self.update(x));
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let [n, avg, m2, m3, m4] = [0, 1, 2, 3, 4].map(|i| states[i].as_primitive::<Float64Type>());
        for row in 0..n.len() {
            let part = |array: &Float64Array| array.value(row);
            let other = Moments { n: part(n), avg: part(avg), m2: part(m2), m3: part(m3), m4: part(m4), ..*self };
            self.merge(other);
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok([self.n, self.avg, self.m2, self.m3, self.m4].map(|v| ScalarValue::Float64(Some(v))).to_vec())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.result()))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments_of(statistic: Statistic, values: &[f64]) -> Moments {
        let mut moments = Moments { statistic, n: 0.0, avg: 0.0, m2: 0.0, m3: 0.0, m4: 0.0 };
        values.iter().for_each(|x| moments.update(*x));
        moments
    }

    /// Of 1, 2, 3, 10: skewness 1.0182337649086284 and kurtosis -0.7696 (the population moments, computed apart), whether
    /// the values come in one partition or two merged.
    #[test]
    fn moments_update_and_merge_to_the_same_statistics() {
        let values = [1.0, 2.0, 3.0, 10.0];
        for (statistic, expected) in [(Statistic::Skewness, 1.0182337649086284), (Statistic::Kurtosis, -0.7696)] {
            let whole = moments_of(statistic, &values).result().unwrap();
            let mut merged = moments_of(statistic, &values[..1]);
            merged.merge(moments_of(statistic, &values[1..]));
            for answer in [whole, merged.result().unwrap()] {
                assert!((answer - expected).abs() < 1e-12, "{statistic:?}: {answer}");
            }
        }
        assert_eq!(moments_of(Statistic::Kurtosis, &[5.0, 5.0]).result(), None);
        assert_eq!(moments_of(Statistic::VariancePop, &[100.001; 3]).result(), Some(0.0));
        assert_eq!(moments_of(Statistic::VarianceSamp, &[1.0, 2.0, 3.0, 10.0]).result(), Some(16.666666666666668));
        assert_eq!(moments_of(Statistic::StddevSamp, &[4.0]).result(), None);
        assert_eq!(moments_of(Statistic::Skewness, &[]).result(), None);
    }
}
