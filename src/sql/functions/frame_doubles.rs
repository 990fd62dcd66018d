//! `sum` and `avg` of DOUBLEs over a sliding window frame, as Spark's
//! `SlidingWindowFunctionFrame` computes them: every frame is added up afresh, its rows in
//! order from `0.0`. DataFusion keeps one running total and takes leaving rows back out of it,
//! which differs from a fresh total in the last bits, keeps a NaN or an infinity that has left
//! the frame (NaN minus NaN is NaN), and gives NaN once a total has passed DOUBLE's range and
//! come back. Like Spark's, the cost of a row is the size of its frame.

use std::collections::VecDeque;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Accumulator;

/// What a frame's values give.
#[derive(Debug, Clone, Copy)]
pub enum FrameResult {
    Sum,
    Average,
}

/// The non-NULL values of one sliding frame, in row order.
#[derive(Debug)]
pub struct FrameDoubles {
    result: FrameResult,
    values: VecDeque<f64>,
}

impl FrameDoubles {
    pub fn new(result: FrameResult) -> Self {
        FrameDoubles { result, values: VecDeque::new() }
    }

    /// The frame's total, added in row order as Spark's `Sum` adds it.
    fn total(&self) -> Option<f64> {
        (!self.values.is_empty()).then(|| self.values.iter().fold(0.0, |total, value| total + value))
    }

    fn doubles(values: &[ArrayRef]) -> Result<ArrayRef> {
        let values =
            values.first().ok_or_else(|| DataFusionError::Internal("a window frame's sum of no column".to_string()))?;
        Ok(datafusion::arrow::compute::cast(values, &DataType::Float64)?)
    }
}

impl Accumulator for FrameDoubles {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = Self::doubles(values)?;
        self.values.extend(values.as_primitive::<Float64Type>().iter().flatten());
        Ok(())
    }

    /// The rows leaving a frame are its first ones: a sliding frame's bounds only move forward.
    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = Self::doubles(values)?;
        let leaving = values.len() - values.null_count();
        if leaving > self.values.len() {
            return Err(DataFusionError::Internal("more rows leave a window frame than it holds".to_string()));
        }
        self.values.drain(..leaving);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, _: &[ArrayRef]) -> Result<()> {
        Err(DataFusionError::Internal("a window frame's total is not merged".to_string()))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let total = ScalarValue::Float64(self.total());
        Ok(match self.result {
            FrameResult::Sum => vec![total],
            FrameResult::Average => vec![total, ScalarValue::Int64(Some(self.values.len() as i64))],
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let total = self.total();
        Ok(ScalarValue::Float64(match self.result {
            FrameResult::Sum => total,
            FrameResult::Average => total.map(|total| total / self.values.len() as f64),
        }))
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.values.capacity() * size_of::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Float64Array;

    use super::*;

    fn doubles(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(values.to_vec()))
    }

    fn evaluate(frame: &mut FrameDoubles) -> Option<f64> {
        match frame.evaluate().unwrap() {
            ScalarValue::Float64(value) => value,
            other => panic!("not a DOUBLE: {other:?}"),
        }
    }

    #[test]
    fn values_that_left_the_frame_leave_no_trace() {
        let mut frame = FrameDoubles::new(FrameResult::Sum);
        frame.update_batch(&[doubles(&[Some(f64::NAN), None, Some(f64::INFINITY), Some(1e308), Some(1e308)])]).unwrap();
        assert!(evaluate(&mut frame).unwrap().is_nan());
        frame.retract_batch(&[doubles(&[Some(f64::NAN), None, Some(f64::INFINITY)])]).unwrap();
        assert_eq!(evaluate(&mut frame), Some(f64::INFINITY), "1e308 + 1e308 overflows");
        frame.retract_batch(&[doubles(&[Some(1e308)])]).unwrap();
        frame.update_batch(&[doubles(&[Some(2.0)])]).unwrap();
        assert_eq!(evaluate(&mut frame), Some(1e308 + 2.0));
        frame.retract_batch(&[doubles(&[Some(1e308), Some(2.0)])]).unwrap();
        assert_eq!(evaluate(&mut frame), None, "an empty frame's sum is NULL");
    }

    #[test]
    fn a_frame_is_added_in_row_order_from_zero() {
        let mut average = FrameDoubles::new(FrameResult::Average);
        average.update_batch(&[doubles(&[Some(0.1), Some(0.2), Some(0.3), None])]).unwrap();
        assert_eq!(evaluate(&mut average), Some((0.0 + 0.1 + 0.2 + 0.3) / 3.0));
        average.retract_batch(&[doubles(&[Some(0.1)])]).unwrap();
        assert_eq!(evaluate(&mut average), Some((0.2 + 0.3) / 2.0));
        let mut sum = FrameDoubles::new(FrameResult::Sum);
        sum.update_batch(&[doubles(&[Some(-0.0)])]).unwrap();
        assert!(evaluate(&mut sum).unwrap().is_sign_positive(), "0.0 + -0.0 is 0.0, as in Spark");
    }
}
