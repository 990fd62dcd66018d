//! How Spark's `Cast` reads a string as a DATE, a TIMESTAMP or a DECIMAL
//! (`SparkDateTimeUtils.stringToDate`, `stringToTimestamp` and `Decimal.fromStringANSI`), where
//! Arrow's casts read other forms:
//!
//! - a DATE is `[+-]yyyy[-[m]m[-[d]d]]`, the year of 4 to 7 digits, month and day of one or two,
//!   and after a whole date anything that follows a space or a `T` is ignored
//!   (`'2024-3-5 10:00'` is 2024-03-05);
//! - a TIMESTAMP is such a date (a year of 4 to 6 digits) followed by a space or `T` and
//!   `[h]h:[m]m:[s]s[.fraction][zone]`, or a time alone (`[T][h]h:[m]m:[s]s…`, on today's date);
//!   digits of the fraction past the sixth are dropped. The zone is `Z`, an offset
//!   (`+h`, `+hh:mm`, `+hhmm`, `+hh:mm:ss`, `+h:mm`), an offset after `UTC`, `GMT` or `UT`, a
//!   region (`Europe/Paris`) or one of Java's short ids (`PST`); without one, the session's;
//! - a DECIMAL is Java's `BigDecimal` text: a sign, digits with a point, an exponent
//!   (`'1.5e3'` is 1500), rounded half up to the target's scale.
//!
//! Leading and trailing whitespace and control characters are ignored, as in Spark. A string
//! none of these reads fails with CAST_INVALID_INPUT (`22018`), a DECIMAL past its precision
//! with NUMERIC_VALUE_OUT_OF_RANGE (`22003`); `try_cast` gives NULL for both.

use std::sync::Arc;

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{ArrayRef, AsArray, Date32Array, Decimal128Array, TimestampMicrosecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit, i256};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::decimal_division::{DecimalBound, power_of_ten};
use crate::error::malformed_string;
use crate::exec::columnar::{input_column, shaped_like};

/// `CAST(text AS to)` (`TRY_CAST` where `tolerant`) as Spark reads strings, where `to` is a
/// DATE, a TIMESTAMP or a DECIMAL; `None` for other types, which Arrow's casts read as Spark's.
pub fn cast_from_string(text: Expr, to: &DataType, tolerant: bool) -> Option<Expr> {
    let reads =
        matches!(to, DataType::Date32 | DataType::Timestamp(TimeUnit::Microsecond, _) | DataType::Decimal128(..));
    let signature = Signature::any(1, Volatility::Immutable);
    reads.then(|| ScalarUDF::new_from_impl(FromString { to: to.clone(), tolerant, signature }).call(vec![text]))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FromString {
    to: DataType,
    /// NULL for a string that is not read, as in `try_cast`, instead of an error.
    tolerant: bool,
    signature: Signature,
}

impl ScalarUDFImpl for FromString {
    fn name(&self) -> &str {
        "spark_string_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let text = cast(&input_column(&args.args[0])?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let read: ArrayRef = match &self.to {
            DataType::Date32 => {
                Arc::new(text.iter().map(|t| self.read(t, "DATE", string_to_date)).collect::<Result<Date32Array>>()?)
            }
            DataType::Timestamp(_, zone) => {
                let session: Option<Tz> = zone.as_deref().map(str::parse).transpose()?;
                let name = if zone.is_some() { "TIMESTAMP" } else { "TIMESTAMP_NTZ" };
                let micros = text
                    .iter()
                    .map(|t| self.read(t, name, |t| string_to_timestamp(t, session.as_ref())))
                    .collect::<Result<TimestampMicrosecondArray>>()?;
                Arc::new(micros.with_timezone_opt(zone.clone()))
            }
            DataType::Decimal128(precision, scale) => {
                let name = format!("DECIMAL({precision},{scale})");
                let bound = DecimalBound::of(*precision, *scale);
                let decimals = text
                    .iter()
                    .map(|t| {
                        let Some(value) = self.read(t, &name, |t| string_to_decimal(t, *scale))? else {
                            return Ok(None);
                        };
                        match (bound.check(value), self.tolerant) {
                            (Ok(()), _) => Ok(Some(value.as_i128())),
                            (Err(_), true) => Ok(None),
                            (Err(error), false) => Err(DataFusionError::External(Box::new(error))),
                        }
                    })
                    .collect::<Result<Decimal128Array>>()?;
                Arc::new(decimals.with_precision_and_scale(*precision, *scale)?)
            }
            other => return Err(DataFusionError::Internal(format!("a string is not read as {other} here"))),
        };
        shaped_like(&args.args[0], read)
    }
}

impl FromString {
    /// `text` read by `read`: NULL for NULL, and for a string not read either NULL or Spark's
    /// CAST_INVALID_INPUT naming `target`.
    fn read<T>(&self, text: Option<&str>, target: &str, read: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
        let Some(text) = text else { return Ok(None) };
        match (read(text), self.tolerant) {
            (Some(value), _) => Ok(Some(value)),
            (None, true) => Ok(None),
            (None, false) => Err(DataFusionError::External(Box::new(malformed_string(text, target)))),
        }
    }
}

/// Java's `ZoneId.SHORT_IDS`, which Spark's `getZoneId` accepts.
const SHORT_IDS: [(&str, &str); 28] = [
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
    ("EST", "-05:00"),
    ("MST", "-07:00"),
    ("HST", "-10:00"),
];

/// `text` without the whitespace and control characters around it (`UTF8String.trimAll`).
fn trimmed(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c.is_control())
}

/// The days since 1970 of a DATE written as Spark's `stringToDate` reads one.
pub fn string_to_date(text: &str) -> Option<i32> {
    let text = trimmed(text).as_bytes();
    let (sign, mut rest) = match text.first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let mut segments = [1i64, 1, 1];
    let mut index = 0;
    let (mut value, mut digits) = (0i64, 0);
    let valid = |index: usize, digits: usize| match index {
        0 => (4..=7).contains(&digits),
        _ => (1..=2).contains(&digits),
    };
    while let Some((&byte, tail)) = rest.split_first() {
        if index == 2 && (byte == b' ' || byte == b'T') {
            break;
        }
        if byte == b'-' && index < 2 {
            if !valid(index, digits) {
                return None;
            }
            segments[index] = value;
            (value, digits) = (0, 0);
            index += 1;
        } else if byte.is_ascii_digit() {
            value = value * 10 + i64::from(byte - b'0');
            digits += 1;
        } else {
            return None;
        }
        rest = tail;
    }
    if !valid(index, digits) {
        return None;
    }
    segments[index] = value;
    let date =
        NaiveDate::from_ymd_opt(i32::try_from(sign * segments[0]).ok()?, month(segments[1])?, day(segments[2])?)?;
    i32::try_from(date.signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days()).ok()
}

fn month(value: i64) -> Option<u32> {
    u32::try_from(value).ok().filter(|m| (1..=12).contains(m))
}

fn day(value: i64) -> Option<u32> {
    u32::try_from(value).ok().filter(|d| (1..=31).contains(d))
}

/// A TIMESTAMP's fields as Spark's `parseTimestampString` reads them.
struct TimestampText<'a> {
    /// Year, month, day, hour, minute, second, microsecond.
    fields: [i64; 7],
    zone: Option<&'a str>,
    time_only: bool,
}

fn parse_timestamp_text(text: &str) -> Option<TimestampText<'_>> {
    let text = trimmed(text);
    let bytes = text.as_bytes();
    let mut fields = [1i64, 1, 1, 0, 0, 0, 0];
    // Segments 7 and 8, the hours and minutes of an offset Spark reads with the fields, are read
    // with the zone below instead.
    let valid = |index: usize, digits: usize| match index {
        0 => (4..=6).contains(&digits),
        6 => true,
        _ => (1..=2).contains(&digits),
    };
    let (mut index, mut value, mut digits, mut fraction_digits) = (0usize, 0i64, 0usize, 0u32);
    let mut time_only = false;
    let mut year_sign = None;
    let mut zone = None;
    let mut at = 0;
    if let Some(&sign @ (b'-' | b'+')) = bytes.first() {
        year_sign = Some(if sign == b'-' { -1 } else { 1 });
        at = 1;
    }
    let close = |index: &mut usize, value: &mut i64, digits: &mut usize, fields: &mut [i64; 7]| {
        if !valid(*index, *digits) {
            return false;
        }
        fields[*index] = *value;
        (*value, *digits) = (0, 0);
        *index += 1;
        true
    };
    while at < bytes.len() {
        let byte = bytes[at];
        if byte.is_ascii_digit() {
            if index == 6 {
                fraction_digits += 1;
            }
            if index != 6 || digits < 6 {
                value = value * 10 + i64::from(byte - b'0');
            }
            digits += 1;
            at += 1;
            continue;
        }
        match index {
            _ if at == 0 && byte == b'T' => {
                time_only = true;
                index = 3;
            }
            0 | 1 if byte == b'-' => {
                if !close(&mut index, &mut value, &mut digits, &mut fields) {
                    return None;
                }
            }
            0 if byte == b':' && year_sign.is_none() => {
                time_only = true;
                if !valid(3, digits) {
                    return None;
                }
                fields[3] = value;
                (value, digits) = (0, 0);
                index = 4;
            }
            2 if byte == b' ' || byte == b'T' => {
                if !close(&mut index, &mut value, &mut digits, &mut fields) {
                    return None;
                }
            }
            3 | 4 if byte == b':' => {
                if !close(&mut index, &mut value, &mut digits, &mut fields) {
                    return None;
                }
            }
            5 if byte == b'.' => {
                if !close(&mut index, &mut value, &mut digits, &mut fields) {
                    return None;
                }
            }
            5 | 6 => {
                // The seconds or the fraction end where the zone begins.
                if !close(&mut index, &mut value, &mut digits, &mut fields) {
                    return None;
                }
                zone = Some(trimmed(&text[at..]));
                break;
            }
            _ => return None,
        }
        at += 1;
    }
    if zone.is_none() {
        if !valid(index, digits) {
            return None;
        }
        fields[index] = value;
    }
    while fraction_digits < 6 {
        fields[6] *= 10;
        fraction_digits += 1;
    }
    fields[0] *= year_sign.unwrap_or(1);
    Some(TimestampText { fields, zone, time_only })
}

/// Spark's `getZoneId`: a zone as Java's `ZoneId.of` reads it, with Java's short ids.
fn zone_of(name: &str) -> Option<Tz> {
    if name == "Z" {
        return "+00:00".parse().ok();
    }
    if let Some((_, id)) = SHORT_IDS.iter().find(|(short, _)| *short == name) {
        return id.parse().ok();
    }
    if name.starts_with(['+', '-']) {
        return offset(name)?.parse().ok();
    }
    for prefix in ["UTC", "GMT", "UT"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return match rest {
                "" => "+00:00".parse().ok(),
                rest if rest.starts_with(['+', '-']) => offset(rest)?.parse().ok(),
                _ => None,
            };
        }
    }
    name.contains('/').then(|| name.parse().ok())?
}

/// An offset written `+h`, `+hh`, `+h:mm`, `+hh:m`, `+hh:mm`, `+hhmm`, `+hh:mm:ss` or
/// `+hhmmss`, as `±hh:mm[:ss]`, within ±18 hours.
fn offset(text: &str) -> Option<String> {
    let (sign, rest) = text.split_at(1);
    let parts: Vec<&str> = rest.split(':').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h] if digits(h) && h.len() <= 2 => (*h, "0", "0"),
        [hm] if digits(hm) && hm.len() == 4 => (&hm[..2], &hm[2..], "0"),
        [hms] if digits(hms) && hms.len() == 6 => (&hms[..2], &hms[2..4], &hms[4..]),
        [h, m] if digits(h) && digits(m) && h.len() <= 2 && m.len() <= 2 => (*h, *m, "0"),
        [h, m, s] if [h, m, s].iter().all(|p| digits(p) && p.len() == 2) => (*h, *m, *s),
        _ => return None,
    };
    let (hours, minutes, seconds): (u32, u32, u32) =
        (hours.parse().ok()?, minutes.parse().ok()?, seconds.parse().ok()?);
    if minutes > 59 || seconds > 59 || hours * 3600 + minutes * 60 + seconds > 18 * 3600 {
        return None;
    }
    Some(match seconds {
        0 => format!("{sign}{hours:02}:{minutes:02}"),
        _ => format!("{sign}{hours:02}:{minutes:02}:{seconds:02}"),
    })
}

/// The microseconds since 1970 of a TIMESTAMP written as Spark's `stringToTimestamp` reads
/// one, in `session_zone` where the text names no zone. For a TIMESTAMP_NTZ (`session_zone`
/// `None`), the wall-clock time read as UTC, a zone in the text ignored.
pub fn string_to_timestamp(text: &str, session_zone: Option<&Tz>) -> Option<i64> {
    let parsed = parse_timestamp_text(text)?;
    let [year, month_field, day_field, hour, minute, second, micros] = parsed.fields;
    let zone = match (parsed.zone, session_zone) {
        (Some(name), Some(_)) => Some(zone_of(name)?),
        (Some(name), None) => {
            zone_of(name)?;
            None
        }
        (None, zone) => zone.cloned(),
    };
    let time = NaiveTime::from_hms_micro_opt(
        u32::try_from(hour).ok()?,
        u32::try_from(minute).ok()?,
        u32::try_from(second).ok()?,
        u32::try_from(micros).ok()?,
    )?;
    let date = match parsed.time_only {
        true => match &zone {
            Some(zone) => Utc::now().with_timezone(zone).date_naive(),
            None => Utc::now().date_naive(),
        },
        false => NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month(month_field)?, day(day_field)?)?,
    };
    let local = NaiveDateTime::new(date, time);
    let instant = match zone {
        None => local.and_utc(),
        Some(zone) => in_zone(local, &zone)?,
    };
    Some(instant.timestamp_micros())
}

/// The instant of a wall-clock time in `zone`, as Java's `ZonedDateTime.of` resolves it: the
/// earlier of two in an overlap, and in a gap the time moved later by the gap's length.
pub fn in_zone(local: NaiveDateTime, zone: &Tz) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(time) | LocalResult::Ambiguous(time, _) => Some(time.with_timezone(&Utc)),
        LocalResult::None => {
            let before = zone.offset_from_utc_datetime(&(local - Duration::days(1))).fix();
            Some((local - Duration::seconds(i64::from(before.local_minus_utc()))).and_utc())
        }
    }
}

/// The unscaled value at `scale` of a number written as Java's `BigDecimal` reads one, rounded
/// half up; `None` for text that is no number or a value past 76 digits.
pub fn string_to_decimal(text: &str, scale: i8) -> Option<i256> {
    let text = trimmed(text);
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i32>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    // The value is digits · 10^(exponent - fraction digits), brought to 10^-scale.
    let shift = exponent.checked_sub(i32::try_from(fraction.len()).ok()?)?.checked_add(i32::from(scale))?;
    let ten = i256::from_i128(10);
    let mut unscaled = i256::ZERO;
    if shift >= 0 {
        if digits.len() as i64 + i64::from(shift) > 76 {
            return (digits.is_empty()).then_some(i256::ZERO);
        }
        for byte in digits.bytes() {
            unscaled = unscaled.wrapping_mul(ten).wrapping_add(i256::from_i128(i128::from(byte - b'0')));
        }
        unscaled = unscaled.wrapping_mul(power_of_ten(shift as u32));
    } else {
        let dropped = usize::try_from(-i64::from(shift)).ok()?;
        let kept = digits.len().saturating_sub(dropped);
        if kept > 76 {
            return None;
        }
        for byte in digits[..kept].bytes() {
            unscaled = unscaled.wrapping_mul(ten).wrapping_add(i256::from_i128(i128::from(byte - b'0')));
        }
        // Half up: the first dropped digit decides.
        let first_dropped = match dropped.checked_sub(digits.len()) {
            Some(0) => digits.as_bytes().first().copied(),
            Some(_) => None,
            None => digits.as_bytes().get(kept).copied(),
        };
        if first_dropped.is_some_and(|d| d >= b'5') {
            unscaled = unscaled.wrapping_add(i256::ONE);
        }
    }
    Some(if negative { unscaled.wrapping_neg() } else { unscaled })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> Option<String> {
        string_to_date(text)
            .map(|days| (NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + Duration::days(days.into())).to_string())
    }

    /// Spark 4.3's `CAST(s AS DATE)` of each text, NULL under `try_cast` where Spark fails.
    #[test]
    fn dates_read_as_sparks() {
        for (text, expected) in [
            ("2024-3-5", Some("2024-03-05")),
            (" 2024-03-05 10:11 ", Some("2024-03-05")),
            ("2024-03-05T10", Some("2024-03-05")),
            ("2024-03-05 anything", Some("2024-03-05")),
            ("2024", Some("2024-01-01")),
            ("2024-7", Some("2024-07-01")),
            ("+2024-07-01", Some("2024-07-01")),
            ("2024-02-30", None),
            ("24-01-01", None),
            ("2024-01 10", None),
            ("2024/01/01", None),
            ("", None),
        ] {
            assert_eq!(date(text).as_deref(), expected, "{text:?}");
        }
    }

    fn timestamp(text: &str, zone: &str) -> Option<String> {
        let zone: Tz = zone.parse().unwrap();
        string_to_timestamp(text, Some(&zone))
            .map(|micros| DateTime::from_timestamp_micros(micros).unwrap().format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    }

    /// Spark 4.3's `CAST(s AS TIMESTAMP)` in the session zone `UTC`, shown in UTC.
    #[test]
    fn timestamps_read_as_sparks() {
        for (text, expected) in [
            ("2024-3-5", Some("2024-03-05 00:00:00.000000")),
            ("2024-03-05 1:2:3", Some("2024-03-05 01:02:03.000000")),
            ("2024-03-05T10:11:12.1234567", Some("2024-03-05 10:11:12.123456")),
            ("2024-03-05 10:11:12Z", Some("2024-03-05 10:11:12.000000")),
            ("2024-03-05 10:11:12+01:00", Some("2024-03-05 09:11:12.000000")),
            ("2024-03-05 10:11:12 UTC+1", Some("2024-03-05 09:11:12.000000")),
            ("2024-03-05 10:11:12.5 Europe/Paris", Some("2024-03-05 09:11:12.500000")),
            ("2024-03-05 10:11:12 PST", Some("2024-03-05 18:11:12.000000")),
            ("2024-03-05 10:11", Some("2024-03-05 10:11:00.000000")),
            ("2024-03-05 25:00:00", None),
            ("2024-03-05 10:11:12 Nowhere", None),
            ("2024-03-05X10:11:12", None),
        ] {
            assert_eq!(timestamp(text, "+00:00").as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn decimals_read_as_java_reads_them() {
        let unscaled = |text: &str, scale: i8| string_to_decimal(text, scale).map(|v| v.to_string());
        for (text, scale, expected) in [
            ("1.5e3", 0, Some("1500")),
            (" -2.345 ", 2, Some("-235")),
            ("0.005", 2, Some("1")),
            ("0.0049", 2, Some("0")),
            ("+.5", 0, Some("1")),
            ("7.", 1, Some("70")),
            ("1E-2", 3, Some("10")),
            ("1e", 0, None),
            ("1.2.3", 0, None),
            ("abc", 0, None),
            ("Infinity", 0, None),
        ] {
            assert_eq!(unscaled(text, scale).as_deref(), expected, "{text:?} at scale {scale}");
        }
    }
}
