//! Dates, times, timestamps and intervals: the writers that send Arrow's
//! temporal values as PostgreSQL's `date`, `time`, `timestamp[tz]` and
//! `interval` (ISO text with ` BC`, or microseconds and days from 2000-01-01),
//! and the parsers for their text input.

use bytes::{BufMut, BytesMut};
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use super::user_error;
use super::value_writer::{ValueWriter, put_display};

pub(super) const USECS_PER_SEC: i64 = 1_000_000;
pub(super) const USECS_PER_MINUTE: i64 = 60 * USECS_PER_SEC;
pub(super) const USECS_PER_HOUR: i64 = 60 * USECS_PER_MINUTE;
pub(super) const USECS_PER_DAY: i64 = 24 * USECS_PER_HOUR;
pub(super) const MSECS_PER_DAY: i64 = USECS_PER_DAY / 1000;
/// Days from the Unix epoch to PostgreSQL's binary epoch, 2000-01-01.
pub(super) const PG_EPOCH_DAYS: i64 = 10_957;
pub(super) const PG_EPOCH_USECS: i64 = PG_EPOCH_DAYS * USECS_PER_DAY;

/// `days` counts from the Unix epoch.
pub(super) fn date_writer<'a>(days: impl Fn(usize) -> i64 + 'a, text: bool) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let days = days(i);
        if text {
            if write_date(buf, days) {
                buf.put_slice(b" BC");
            }
        } else {
            let pg_days = i32::try_from(days - PG_EPOCH_DAYS).map_err(|_| user_error("22008", "date out of range"))?;
            buf.put_i32(pg_days);
        }
        Ok(())
    })
}

/// `micros` counts from midnight.
pub(super) fn time_writer<'a>(micros: impl Fn(usize) -> i64 + 'a, text: bool) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let micros = micros(i);
        if text {
            write_time(buf, micros);
        } else {
            buf.put_i64(micros);
        }
        Ok(())
    })
}

/// `micros` counts from the Unix epoch, `None` when the conversion overflowed.
/// Zoned timestamps are rendered in UTC.
pub(super) fn timestamp_writer<'a>(
    micros: impl Fn(usize) -> Option<i64> + 'a,
    text: bool,
    with_tz: bool,
) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let out_of_range = || user_error("22008", "timestamp out of range");
        let micros = micros(i).ok_or_else(out_of_range)?;
        if text {
            let bc = write_date(buf, micros.div_euclid(USECS_PER_DAY));
            buf.put_u8(b' ');
            write_time(buf, micros.rem_euclid(USECS_PER_DAY));
            if with_tz {
                buf.put_slice(b"+00");
            }
            if bc {
                buf.put_slice(b" BC");
            }
        } else {
            buf.put_i64(micros.checked_sub(PG_EPOCH_USECS).ok_or_else(out_of_range)?);
        }
        Ok(())
    })
}

/// `parts` gives (months, days, microseconds), `None` on overflow.
pub(super) fn interval_writer<'a>(
    parts: impl Fn(usize) -> Option<(i32, i32, i64)> + 'a,
    text: bool,
) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let (months, days, micros) = parts(i).ok_or_else(|| user_error("22008", "interval out of range"))?;
        if text {
            write_interval(buf, months, days, micros);
        } else {
            buf.put_i64(micros);
            buf.put_i32(days);
            buf.put_i32(months);
        }
        Ok(())
    })
}

/// Civil date (year, month, day) of a day count from 1970-01-01, valid for
/// the whole `i64` range that Arrow dates can hold (Howard Hinnant's
/// algorithm; chrono stops at ±262143 years).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// ISO date; returns whether the year is BC, because PostgreSQL puts the
/// ` BC` after any time and zone.
fn write_date(buf: &mut BytesMut, days: i64) -> bool {
    let (year, month, day) = civil_from_days(days);
    let bc = year <= 0;
    let year = if bc { 1 - year } else { year };
    put_display(buf, format_args!("{year:04}-{month:02}-{day:02}"));
    bc
}

/// `HH:MM:SS` plus the microseconds with trailing zeros trimmed.
fn write_time(buf: &mut BytesMut, micros: i64) {
    let hours = micros / USECS_PER_HOUR;
    let minutes = micros % USECS_PER_HOUR / USECS_PER_MINUTE;
    let seconds = micros % USECS_PER_MINUTE / USECS_PER_SEC;
    put_display(buf, format_args!("{hours:02}:{minutes:02}:{seconds:02}"));
    write_fraction(buf, (micros % USECS_PER_SEC).unsigned_abs());
}

fn write_fraction(buf: &mut BytesMut, mut micros: u64) {
    if micros == 0 {
        return;
    }
    let mut width = 6;
    while micros.is_multiple_of(10) {
        micros /= 10;
        width -= 1;
    }
    put_display(buf, format_args!(".{micros:0width$}"));
}

/// `interval_out` with `IntervalStyle = postgres`, e.g. `1 year 2 mons -3 days
/// +04:05:06.789`: a sign is forced on a part that follows a negative one.
fn write_interval(buf: &mut BytesMut, months: i32, days: i32, micros: i64) {
    let mut is_zero = true;
    let mut is_before = false;
    for (value, unit) in [(i64::from(months / 12), "year"), (i64::from(months % 12), "mon"), (i64::from(days), "day")] {
        if value == 0 {
            continue;
        }
        let space = if is_zero { "" } else { " " };
        let plus = if is_before && value > 0 { "+" } else { "" };
        let plural = if value == 1 { "" } else { "s" };
        put_display(buf, format_args!("{space}{plus}{value} {unit}{plural}"));
        is_before = value < 0;
        is_zero = false;
    }
    if is_zero || micros != 0 {
        let space = if is_zero { "" } else { " " };
        let sign = if micros < 0 {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        };
        let abs = micros.unsigned_abs();
        let hours = abs / USECS_PER_HOUR as u64;
        let minutes = abs % USECS_PER_HOUR as u64 / USECS_PER_MINUTE as u64;
        let seconds = abs % USECS_PER_MINUTE as u64 / USECS_PER_SEC as u64;
        put_display(buf, format_args!("{space}{sign}{hours:02}:{minutes:02}:{seconds:02}"));
        write_fraction(buf, abs % USECS_PER_SEC as u64);
    }
}

fn time_micros(t: NaiveTime) -> i64 {
    i64::from(t.num_seconds_from_midnight()) * USECS_PER_SEC + i64::from(t.nanosecond() / 1000)
}

pub(super) fn parse_time(t: &str) -> Option<i64> {
    ["%H:%M:%S%.f", "%H:%M"].iter().find_map(|format| NaiveTime::parse_from_str(t, format).ok()).map(time_micros)
}

/// Microseconds since the Unix epoch of an ISO date or date-time, with `T` or
/// a space between them and an optional UTC offset. The offset is applied
/// for timestamptz and, as PostgreSQL does, ignored for timestamp; a
/// timestamptz without one is taken as UTC.
pub(super) fn parse_timestamp(t: &str, with_tz: bool) -> Option<i64> {
    const FORMATS: [&str; 4] = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"];
    let (datetime, rest) =
        FORMATS.iter().find_map(|format| NaiveDateTime::parse_and_remainder(t, format).ok()).or_else(|| {
            NaiveDate::parse_and_remainder(t, "%Y-%m-%d").ok().map(|(date, rest)| (date.and_time(NaiveTime::MIN), rest))
        })?;
    let offset_secs = parse_utc_offset(rest.trim())?;
    let micros = datetime.and_utc().timestamp_micros();
    if with_tz { micros.checked_sub(offset_secs * USECS_PER_SEC) } else { Some(micros) }
}

/// Seconds east of UTC of `""`, `Z`, `UTC`, `±HH`, `±HHMM`, `±HH:MM` or
/// `±HH:MM:SS`.
fn parse_utc_offset(s: &str) -> Option<i64> {
    if s.is_empty() || s.eq_ignore_ascii_case("z") || s.eq_ignore_ascii_case("utc") {
        return Some(0);
    }
    let (sign, body) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    // Digits and colons only, so that the split below falls between characters.
    if !body.bytes().all(|c| c.is_ascii_digit() || c == b':') {
        return None;
    }
    let parts: Vec<&str> = if body.contains(':') {
        body.split(':').collect()
    } else if body.len() == 4 {
        vec![&body[..2], &body[2..]]
    } else {
        vec![body]
    };
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let secs = parts
        .iter()
        .zip([3600, 60, 1])
        .map(|(part, unit)| part.parse::<i64>().ok().map(|v| v * unit))
        .sum::<Option<i64>>()?;
    Some(sign * secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use datafusion::arrow::array::{
        ArrayRef, Date32Array, Date64Array, DurationMillisecondArray, DurationSecondArray, IntervalDayTimeArray,
        IntervalMonthDayNanoArray, IntervalYearMonthArray, Time32MillisecondArray, Time32SecondArray,
        Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
        TimestampNanosecondArray, TimestampSecondArray,
    };
    use datafusion::arrow::datatypes::{Field, IntervalDayTime, IntervalMonthDayNano, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use pgwire::api::portal::Format;

    use super::super::test_support::{binary, code, days, hex, hexes, micros, text, texts};
    use super::super::{encode_batch, field_infos};

    #[test]
    fn encodes_dates_and_times() {
        let dates: ArrayRef = Arc::new(Date32Array::from(vec![
            Some(0),
            Some(10_957),
            Some(-719_528),
            Some(days(12345, 1, 1)),
            Some(days(2026, 3, 1)),
            None,
        ]));
        assert_eq!(
            text(dates.clone()),
            vec![
                Some("1970-01-01".into()),
                Some("2000-01-01".into()),
                Some("0001-01-01 BC".into()),
                Some("12345-01-01".into()),
                Some("2026-03-01".into()),
                None
            ]
        );
        // date_send('1970-01-01'), ('2000-01-01'), ('0001-01-01 BC')
        assert_eq!(binary(dates)[..3], hexes(&["ffffd533", "00000000", "fff4da8b"])[..]);
        let date64: ArrayRef = Arc::new(Date64Array::from(vec![10_957 * 86_400_000, -1]));
        assert_eq!(text(date64.clone()), texts(&["2000-01-01", "1969-12-31"]));
        assert_eq!(binary(date64), hexes(&["00000000", "ffffd532"]));

        let cases: Vec<(ArrayRef, &str, i64)> = vec![
            (Arc::new(Time64MicrosecondArray::from(vec![36_000_500_000])), "10:00:00.5", 36_000_500_000),
            (Arc::new(Time32SecondArray::from(vec![3661])), "01:01:01", 3_661_000_000),
            (Arc::new(Time32MillisecondArray::from(vec![1500])), "00:00:01.5", 1_500_000),
            (Arc::new(Time64NanosecondArray::from(vec![1_999])), "00:00:00.000001", 1),
            (Arc::new(Time64MicrosecondArray::from(vec![86_400_000_000])), "24:00:00", 86_400_000_000),
        ];
        for (array, expected_text, expected_micros) in cases {
            assert_eq!(text(array.clone()), texts(&[expected_text]));
            assert_eq!(binary(array), vec![Some(expected_micros.to_be_bytes().to_vec())]);
        }
        // time_send('10:00:00.5'), time_send('01:01:01')
        assert_eq!(binary(Arc::new(Time64MicrosecondArray::from(vec![36_000_500_000]))), hexes(&["0000000861cc0920"]));
        assert_eq!(binary(Arc::new(Time32SecondArray::from(vec![3661]))), hexes(&["00000000da366d40"]));
    }

    #[test]
    fn encodes_timestamps() {
        let t = micros(2026, 1, 2, 3, 4, 5, 120_000);
        let bc = micros(-43, 3, 15, 0, 0, 0, 0);
        let naive: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![Some(t), Some(PG_EPOCH_USECS), Some(bc), None]));
        assert_eq!(
            text(naive.clone()),
            vec![
                Some("2026-01-02 03:04:05.12".into()),
                Some("2000-01-01 00:00:00".into()),
                Some("0044-03-15 00:00:00 BC".into()),
                None
            ]
        );
        // timestamp_send('2026-01-02 03:04:05.12'), timestamp_send('2000-01-01')
        assert_eq!(binary(naive)[..2], hexes(&["0002ea5dbb16e800", "0000000000000000"])[..]);

        let zoned: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![t, bc]).with_timezone("UTC"));
        assert_eq!(text(zoned.clone()), texts(&["2026-01-02 03:04:05.12+00", "0044-03-15 00:00:00+00 BC"]));
        assert_eq!(binary(zoned)[0], Some(hex("0002ea5dbb16e800")));
        // Zoned values are instants: rendered in UTC whatever the column's zone.
        let berlin: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![t]).with_timezone("Europe/Berlin"));
        assert_eq!(text(berlin), texts(&["2026-01-02 03:04:05.12+00"]));

        let whole = micros(2026, 1, 2, 3, 4, 5, 0);
        let units: Vec<ArrayRef> = vec![
            Arc::new(TimestampSecondArray::from(vec![whole / 1_000_000])),
            Arc::new(TimestampMillisecondArray::from(vec![whole / 1000])),
            Arc::new(TimestampNanosecondArray::from(vec![whole * 1000])),
        ];
        for array in units {
            assert_eq!(text(array.clone()), texts(&["2026-01-02 03:04:05"]));
            assert_eq!(binary(array), vec![Some((whole - PG_EPOCH_USECS).to_be_bytes().to_vec())]);
        }
        let before_epoch: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![-1]));
        assert_eq!(text(before_epoch), texts(&["1969-12-31 23:59:59.999999"]));

        let overflow: ArrayRef = Arc::new(TimestampSecondArray::from(vec![i64::MAX]));
        let schema = Schema::new(vec![Field::new("c", overflow.data_type().clone(), true)]);
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![overflow]).unwrap();
        let fields = Arc::new(field_infos(&schema, &Format::UnifiedBinary).unwrap());
        assert_eq!(code(encode_batch(&batch, &fields)), "22008");
    }

    #[test]
    fn encodes_intervals() {
        let mdn = |months, days, micros: i64| IntervalMonthDayNano::new(months, days, micros * 1000);
        let hour = USECS_PER_HOUR;
        // (value, interval_out, interval_send where captured from PostgreSQL 15)
        let cases = [
            (mdn(0, 1, 2 * hour), "1 day 02:00:00", Some("00000001ad2748000000000100000000")),
            (mdn(3, 0, 0), "3 mons", Some("00000000000000000000000000000003")),
            (mdn(-12, 2, 1_500_000), "-1 years +2 days 00:00:01.5", Some("000000000016e36000000002fffffff4")),
            (
                mdn(14, -3, 4 * hour + 5 * USECS_PER_MINUTE + 6_789_000),
                "1 year 2 mons -3 days +04:05:06.789",
                Some("000000036c97ca88fffffffd0000000e"),
            ),
            (mdn(0, 0, 0), "00:00:00", None),
            (mdn(0, -1, -2 * hour), "-1 days -02:00:00", None),
            (mdn(0, 0, -500_000), "-00:00:00.5", None),
            (mdn(1, -1, 0), "1 mon -1 days", None),
            (mdn(-1, 1, 0), "-1 mons +1 day", None),
            (mdn(0, 1, -1), "1 day -00:00:00.000001", None),
            (mdn(0, 0, 25 * hour + 1), "25:00:00.000001", None),
            (mdn(-3, 0, 0), "-3 mons", None),
        ];
        let array: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(cases.iter().map(|c| c.0).collect::<Vec<_>>()));
        let expected: Vec<_> = cases.iter().map(|c| c.1).collect();
        assert_eq!(text(array.clone()), texts(&expected));
        for (got, case) in binary(array).into_iter().zip(&cases) {
            if let Some(expected) = case.2 {
                assert_eq!(got, Some(hex(expected)), "{}", case.1);
            }
        }

        let year_month: ArrayRef = Arc::new(IntervalYearMonthArray::from(vec![Some(3), Some(-13), None]));
        assert_eq!(text(year_month.clone()), vec![Some("3 mons".into()), Some("-1 years -1 mons".into()), None]);
        assert_eq!(binary(year_month)[0], Some(hex("00000000000000000000000000000003")));
        let day_time: ArrayRef = Arc::new(IntervalDayTimeArray::from(vec![IntervalDayTime::new(1, 3_600_000)]));
        assert_eq!(text(day_time.clone()), texts(&["1 day 01:00:00"]));
        assert_eq!(binary(day_time), hexes(&["00000000d693a4000000000100000000"]));
        let seconds: ArrayRef = Arc::new(DurationSecondArray::from(vec![360_000]));
        assert_eq!(text(seconds.clone()), texts(&["100:00:00"]));
        assert_eq!(binary(seconds), hexes(&["00000053d1ac10000000000000000000"]));
        let millis: ArrayRef = Arc::new(DurationMillisecondArray::from(vec![-500]));
        assert_eq!(text(millis), texts(&["-00:00:00.5"]));
    }
}
