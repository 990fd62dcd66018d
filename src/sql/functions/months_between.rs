//! Spark's `months_between(a, b [, roundOff])`, which DataFusion lacks (`DateTimeUtils.
//! monthsBetween`): whole months when both fall on the same day of the month or both on a
//! month's last day; otherwise the months between plus the days and whole seconds of the day
//! between, over 31-day months, rounded to 8 decimal places unless `roundOff` is false. DATEs are taken at
//! midnight, TIMESTAMPs in the session's time zone. Where we differ: a time of day is counted
//! on the wall clock, so on a day a daylight-saving change shortens or lengthens, the fraction
//! can differ from Spark's in its last digits.

use std::sync::Arc;

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Date32Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

const SECONDS_PER_DAY: i64 = 86_400;

#[derive(Debug, PartialEq, Eq, Hash)]
struct MonthsBetween {
    signature: Signature,
}

pub fn spark_months_between() -> ScalarUDF {
    ScalarUDF::new_from_impl(MonthsBetween { signature: Signature::user_defined(Volatility::Immutable) })
}

/// A moment as Spark's `monthsBetween` reads it: the local date and the microseconds since its
/// midnight.
fn local(moment: NaiveDateTime) -> (NaiveDate, i64) {
    let time = moment.time();
    (moment.date(), i64::from(time.num_seconds_from_midnight()) * 1_000_000 + i64::from(time.nanosecond() / 1000))
}

fn is_last_day_of_month(date: NaiveDate) -> bool {
    date.succ_opt().is_none_or(|next| next.month() != date.month())
}

/// Spark's `monthsBetween` of two local moments.
fn months_between(a: (NaiveDate, i64), b: (NaiveDate, i64), round_off: bool) -> f64 {
    let months = |date: NaiveDate| i64::from(date.year()) * 12 + i64::from(date.month());
    let month_diff = (months(a.0) - months(b.0)) as f64;
    let (day_a, day_b) = (a.0.day(), b.0.day());
    if day_a == day_b || (is_last_day_of_month(a.0) && is_last_day_of_month(b.0)) {
        return month_diff;
    }
    // Whole seconds, as Spark counts them.
    let seconds_in_day = |micros: i64| micros / 1_000_000;
    let seconds_between =
        (i64::from(day_a) - i64::from(day_b)) * SECONDS_PER_DAY + seconds_in_day(a.1) - seconds_in_day(b.1);
    let diff = month_diff + seconds_between as f64 / (31 * SECONDS_PER_DAY) as f64;
    // Java's Math.round: half up, towards positive infinity.
    if round_off { (diff * 1e8 + 0.5).floor() / 1e8 } else { diff }
}

impl ScalarUDFImpl for MonthsBetween {
    fn name(&self) -> &str {
        "months_between"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// DATEs stay, TIMESTAMPs become microseconds, strings are read as TIMESTAMPs; `roundOff`
    /// is a BOOLEAN.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if !(2..=3).contains(&arg_types.len()) {
            return Err(DataFusionError::Plan("months_between takes two moments and perhaps roundOff".to_string()));
        }
        let moment = |t: &DataType| match t {
            DataType::Date32 => DataType::Date32,
            DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone.clone()),
            _ => DataType::Timestamp(TimeUnit::Microsecond, None),
        };
        let mut types = vec![moment(&arg_types[0]), moment(&arg_types[1])];
        if arg_types.len() == 3 {
            types.push(DataType::Boolean);
        }
        Ok(types)
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let round_off = match args.args.get(2) {
            None => true,
            Some(ColumnarValue::Scalar(ScalarValue::Boolean(Some(round_off)))) => *round_off,
            Some(_) => return Err(DataFusionError::Plan("roundOff of months_between must be TRUE or FALSE".into())),
        };
        let zone: Option<Tz> = args.config_options.execution.time_zone.as_deref().and_then(|z| z.parse().ok());
        let moments = |arg: &ColumnarValue| -> Result<Vec<Option<(NaiveDate, i64)>>> {
            let array = arg.to_array(args.number_rows)?;
            local_moments(&array, zone)
        };
        let (a, b) = (moments(&args.args[0])?, moments(&args.args[1])?);
        let months: Float64Array = a.into_iter().zip(b).map(|(a, b)| Some(months_between(a?, b?, round_off))).collect();
        Ok(ColumnarValue::Array(Arc::new(months) as ArrayRef))
    }
}

/// Each value of a DATE or TIMESTAMP column as a local moment: a TIMESTAMP with a time zone in
/// the session's zone (UTC when it has none), one without as it is.
fn local_moments(array: &ArrayRef, zone: Option<Tz>) -> Result<Vec<Option<(NaiveDate, i64)>>> {
    match array.data_type() {
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>();
            Ok(days.iter().map(|d| d.and_then(Date32Type::to_naive_date_opt).map(|date| (date, 0))).collect())
        }
        DataType::Timestamp(_, with_zone) => {
            let with_zone = with_zone.is_some();
            let micros = cast(array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let micros = micros.as_primitive::<TimestampMicrosecondType>();
            Ok(micros
                .iter()
                .map(|us| {
                    let utc = chrono::DateTime::from_timestamp_micros(us?)?;
                    let wall = match (with_zone, zone) {
                        (true, Some(zone)) => utc.with_timezone(&zone).naive_local(),
                        _ => utc.naive_utc(),
                    };
                    Some(local(wall))
                })
                .collect())
        }
        other => Err(DataFusionError::Plan(format!("months_between takes DATEs and TIMESTAMPs, not {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(date: &str, micros: i64) -> (NaiveDate, i64) {
        (date.parse().unwrap(), micros)
    }

    /// Spark 4.3's examples: `months_between('1997-02-28 10:30:00', '1996-10-30')` is 3.94959677,
    /// 3.9495967741935485 without rounding; the same day, or two last days, give whole months.
    #[test]
    fn months_between_as_spark_counts_them() {
        let half_past_ten = (10 * 3600 + 30 * 60) * 1_000_000;
        assert_eq!(months_between(at("1997-02-28", half_past_ten), at("1996-10-30", 0), true), 3.94959677);
        assert_eq!(months_between(at("1997-02-28", half_past_ten), at("1996-10-30", 0), false), 3.9495967741935485);
        assert_eq!(months_between(at("2024-03-31", 5), at("2024-02-29", 0), true), 1.0);
        assert_eq!(months_between(at("2024-01-15", 0), at("2024-03-15", 7), true), -2.0);
        // Spark 4.3: months_between(TIMESTAMP '2024-01-10 23:59:59.999999', TIMESTAMP
        // '2023-12-31 00:00:01') counts 86398 seconds between the times of day.
        assert_eq!(months_between(at("2024-01-10", 86_399_999_999), at("2023-12-31", 1_000_000), true), 0.35483796);
    }
}
