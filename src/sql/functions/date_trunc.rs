//! Spark's `date_trunc(unit, timestamp)` and `trunc(date, unit)` (`TruncTimestamp`,
//! `TruncDate`), in microseconds and the session's time zone as Spark's `truncTimestamp` and
//! `truncDate` compute them. The forms of `datafusion-spark` go through DataFusion's
//! `date_trunc`, which counts nanoseconds and so fails on dates before 1677. Units, in any
//! case: `YEAR`/`YYYY`/`YY`, `QUARTER`, `MONTH`/`MM`/`MON`, `WEEK` (from Monday), and for
//! `date_trunc` also `DAY`/`DD`, `HOUR`, `MINUTE`, `SECOND`, `MILLISECOND` and `MICROSECOND`;
//! another unit gives NULL, as in Spark.

use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{ArrayRef, AsArray, Date32Array, TimestampMicrosecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Date32Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::planner::cast_from_string::in_zone;

const MICROS_PER_SECOND: i64 = 1_000_000;

/// How far a unit truncates, finest first, as Spark's `TRUNC_TO_*` levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    fn of(name: &str) -> Option<Unit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "MICROSECOND" => Unit::Microsecond,
            "MILLISECOND" => Unit::Millisecond,
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" | "DD" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" | "MM" | "MON" => Unit::Month,
            "QUARTER" => Unit::Quarter,
            "YEAR" | "YYYY" | "YY" => Unit::Year,
            _ => return None,
        })
    }

    /// Spark's `truncDate`: the first day of the unit holding `date`.
    fn date(self, date: NaiveDate) -> Option<NaiveDate> {
        match self {
            Unit::Week => Some(date - Duration::days(i64::from(date.weekday().num_days_from_monday()))),
            Unit::Month => date.with_day(1),
            Unit::Quarter => NaiveDate::from_ymd_opt(date.year(), (date.month() - 1) / 3 * 3 + 1, 1),
            Unit::Year => NaiveDate::from_ymd_opt(date.year(), 1, 1),
            _ => None,
        }
    }

    /// Spark's `truncTimestamp` of microseconds since 1970 in `zone` (UTC for a TIMESTAMP_NTZ).
    fn timestamp(self, micros: i64, zone: &Tz) -> Option<i64> {
        let local = || DateTime::from_timestamp_micros(micros).map(|t| t.with_timezone(zone).naive_local());
        let at = |local: NaiveDateTime| in_zone(local, zone).map(|t| t.timestamp_micros());
        match self {
            Unit::Microsecond => Some(micros),
            Unit::Millisecond => Some(micros - micros.rem_euclid(1_000)),
            Unit::Second => Some(micros - micros.rem_euclid(MICROS_PER_SECOND)),
            Unit::Minute => at(local()?.with_second(0)?.with_nanosecond(0)?),
            Unit::Hour => at(local()?.with_minute(0)?.with_second(0)?.with_nanosecond(0)?),
            Unit::Day => at(local()?.date().and_time(NaiveTime::MIN)),
            _ => at(self.date(local()?.date())?.and_time(NaiveTime::MIN)),
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Truncate {
    /// `trunc(date, unit)`, where `date_trunc(unit, timestamp)` otherwise.
    date: bool,
    signature: Signature,
}

/// Spark's `date_trunc` and `trunc`, to register in place of `datafusion-spark`'s.
pub fn spark_date_truncs() -> [ScalarUDF; 2] {
    [false, true]
        .map(|date| ScalarUDF::new_from_impl(Truncate { date, signature: Signature::any(2, Volatility::Immutable) }))
}

impl ScalarUDFImpl for Truncate {
    fn name(&self) -> &str {
        if self.date { "trunc" } else { "date_trunc" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [first, second] = arg_types else { return plan_err!("{} takes two arguments", self.name()) };
        Ok(match self.date {
            true => vec![DataType::Date32, DataType::Utf8],
            false => match second {
                DataType::Timestamp(_, zone) => {
                    vec![first.clone(), DataType::Timestamp(TimeUnit::Microsecond, zone.clone())]
                }
                _ => vec![first.clone(), DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))],
            },
        })
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.date {
            true => DataType::Date32,
            false => arg_types[1].clone(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (value, units) = if self.date { (&arrays[0], &arrays[1]) } else { (&arrays[1], &arrays[0]) };
        let units = cast(units, &DataType::Utf8)?;
        let units = units.as_string::<i32>().iter().map(|unit| unit.and_then(Unit::of));
        let truncated: ArrayRef = match value.data_type() {
            DataType::Date32 => {
                let dates = value.as_primitive::<Date32Type>().iter().zip(units).map(|(days, unit)| {
                    let date = Date32Type::to_naive_date_opt(days?)?;
                    let first = unit.filter(|u| *u >= Unit::Week)?.date(date)?;
                    i32::try_from((first - NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days()).ok()
                });
                Arc::new(dates.collect::<Date32Array>())
            }
            DataType::Timestamp(_, zone) => {
                let in_zone: Tz = zone.as_deref().unwrap_or("+00:00").parse()?;
                let micros = value
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .zip(units)
                    .map(|(micros, unit)| unit?.timestamp(micros?, &in_zone));
                Arc::new(micros.collect::<TimestampMicrosecondArray>().with_timezone_opt(zone.clone()))
            }
            other => return plan_err!("{} of {other}", self.name()),
        };
        Ok(match args.args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_))) {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&truncated, 0)?),
            false => ColumnarValue::Array(truncated),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truncated(unit: &str, at: &str, zone: &str) -> String {
        let zone: Tz = zone.parse().unwrap();
        let local = NaiveDateTime::parse_from_str(at, "%Y-%m-%d %H:%M:%S").unwrap();
        let micros = in_zone(local, &zone).unwrap().timestamp_micros();
        let result = Unit::of(unit).unwrap().timestamp(micros, &zone).unwrap();
        DateTime::from_timestamp_micros(result).unwrap().with_timezone(&zone).format("%Y-%m-%d %H:%M:%S").to_string()
    }

    /// Spark 4.3's `date_trunc`, in the session zones named, before 1677 too.
    #[test]
    fn timestamps_truncate_in_the_session_zone() {
        for (unit, at, zone, expected) in [
            ("year", "1500-03-05 10:11:12", "UTC", "1500-01-01 00:00:00"),
            ("QUARTER", "2024-08-05 10:11:12", "UTC", "2024-07-01 00:00:00"),
            ("week", "2024-03-07 10:11:12", "UTC", "2024-03-04 00:00:00"),
            ("dd", "2024-03-05 10:11:12", "America/New_York", "2024-03-05 00:00:00"),
            ("hour", "2024-03-05 10:11:12", "Asia/Kolkata", "2024-03-05 10:00:00"),
            ("mon", "1200-02-29 23:59:59", "Europe/Paris", "1200-02-01 00:00:00"),
        ] {
            assert_eq!(truncated(unit, at, zone), expected, "{unit} of {at} in {zone}");
        }
        assert_eq!(Unit::of("fortnight"), None);
    }
}
