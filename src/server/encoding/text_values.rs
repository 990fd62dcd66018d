//! Text-format parameter values, read the way PostgreSQL's input functions
//! accept them (`boolin`, `int4in`, `float8in`, `byteain`, ...); numerics and
//! dates and times have their parsers beside their writers.

use std::num::{IntErrorKind, ParseIntError};
use std::str::FromStr;

use datafusion::common::ScalarValue;
use pgwire::api::Type;

use super::datetime::{USECS_PER_DAY, parse_time, parse_timestamp};
use super::numeric::parse_numeric;
use super::param_error::ParamError;

/// Decodes a text-format value the way PostgreSQL's input functions accept it
/// (surrounding whitespace allowed for all but string types).
pub(super) fn decode_text(ty: &Type, raw: &[u8]) -> Result<ScalarValue, ParamError> {
    let s = std::str::from_utf8(raw).map_err(|_| ParamError::Encoding)?;
    let t = s.trim();
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(Some(parse_bool(t).ok_or_else(|| ParamError::syntax(s))?)),
        Type::INT2 => ScalarValue::Int16(Some(parse_int(t)?)),
        Type::INT4 => ScalarValue::Int32(Some(parse_int(t)?)),
        Type::INT8 => ScalarValue::Int64(Some(parse_int(t)?)),
        Type::OID => ScalarValue::Int64(Some(parse_oid(t)?)),
        Type::FLOAT4 => ScalarValue::Float32(Some(parse_float(t)?)),
        Type::FLOAT8 => ScalarValue::Float64(Some(parse_float(t)?)),
        Type::NUMERIC => parse_numeric(t).ok_or_else(|| ParamError::syntax(t))?,
        Type::BYTEA => ScalarValue::Binary(Some(parse_bytea(raw).ok_or_else(|| ParamError::syntax(s))?)),
        Type::DATE => {
            let micros = parse_timestamp(t, false).ok_or_else(|| ParamError::syntax(s))?;
            let days = i32::try_from(micros.div_euclid(USECS_PER_DAY)).map_err(|_| ParamError::OutOfRange)?;
            ScalarValue::Date32(Some(days))
        }
        Type::TIME => ScalarValue::Time64Microsecond(Some(parse_time(t).ok_or_else(|| ParamError::syntax(s))?)),
        Type::TIMESTAMP => ScalarValue::TimestampMicrosecond(
            Some(parse_timestamp(t, false).ok_or_else(|| ParamError::syntax(s))?),
            None,
        ),
        Type::TIMESTAMPTZ => ScalarValue::TimestampMicrosecond(
            Some(parse_timestamp(t, true).ok_or_else(|| ParamError::syntax(s))?),
            Some("UTC".into()),
        ),
        _ => ScalarValue::Utf8(Some(s.to_owned())),
    })
}

/// `boolin`: any unambiguous prefix of true/false/yes/no/on/off, or 1/0.
fn parse_bool(t: &str) -> Option<bool> {
    let t = t.to_ascii_lowercase();
    let prefix_of = |word: &str, min: usize| t.len() >= min && word.starts_with(t.as_str());
    if prefix_of("true", 1) || prefix_of("yes", 1) || prefix_of("on", 2) || t == "1" {
        Some(true)
    } else if prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) || t == "0" {
        Some(false)
    } else {
        None
    }
}

fn parse_int<T: FromStr<Err = ParseIntError>>(t: &str) -> Result<T, ParamError> {
    t.parse().map_err(|e: ParseIntError| match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => ParamError::OutOfRange,
        _ => ParamError::syntax(t),
    })
}

/// `oidin` also accepts negative numbers, wrapping them into the u32 range.
fn parse_oid(t: &str) -> Result<i64, ParamError> {
    let v: i64 = parse_int(t)?;
    if (i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(&v) {
        Ok(i64::from(v as u32))
    } else {
        Err(ParamError::OutOfRange)
    }
}

/// Overflow to infinity is an error unless infinity was written.
fn parse_float<T: FromStr + Into<f64> + Copy>(t: &str) -> Result<T, ParamError> {
    let v: T = t.parse().map_err(|_| ParamError::syntax(t))?;
    if v.into().is_infinite() && !t.to_ascii_lowercase().contains("inf") { Err(ParamError::OutOfRange) } else { Ok(v) }
}

/// `byteain`: hex format (`\x` then digit pairs, whitespace allowed between
/// pairs) or the escape format (`\\` and `\ooo` octal escapes).
pub(crate) fn parse_bytea(raw: &[u8]) -> Option<Vec<u8>> {
    if let Some(hex) = raw.strip_prefix(b"\\x") {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut chars = hex.iter().copied().filter(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
        while let Some(high) = chars.next() {
            let low = chars.next()?;
            let nibble = |c: u8| char::from(c).to_digit(16);
            out.push((nibble(high)? << 4 | nibble(low)?) as u8);
        }
        return Some(out);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
        } else if raw.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = raw.get(i + 1..i + 4)?;
            if !(b'0'..=b'3').contains(&octal[0]) || !octal[1..].iter().all(|c| (b'0'..=b'7').contains(c)) {
                return None;
            }
            out.push(octal.iter().fold(0u8, |acc, c| (acc << 3) | (c - b'0')));
            i += 4;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::test_support::{days, decode_text_one, micros};
    use super::*;

    #[test]
    fn decodes_text_parameters() {
        let t = micros(2026, 1, 2, 3, 4, 5, 120_000);
        let utc = || Some(Arc::<str>::from("UTC"));
        let cases = [
            (Type::BOOL, "t", ScalarValue::Boolean(Some(true))),
            (Type::BOOL, " TRUE ", ScalarValue::Boolean(Some(true))),
            (Type::BOOL, "yes", ScalarValue::Boolean(Some(true))),
            (Type::BOOL, "on", ScalarValue::Boolean(Some(true))),
            (Type::BOOL, "0", ScalarValue::Boolean(Some(false))),
            (Type::BOOL, "of", ScalarValue::Boolean(Some(false))),
            (Type::INT2, " -7 ", ScalarValue::Int16(Some(-7))),
            (Type::INT4, "+42", ScalarValue::Int32(Some(42))),
            (Type::INT8, "9223372036854775807", ScalarValue::Int64(Some(i64::MAX))),
            (Type::OID, "4294967295", ScalarValue::Int64(Some(4_294_967_295))),
            (Type::OID, "-1", ScalarValue::Int64(Some(4_294_967_295))),
            (Type::FLOAT4, "1.5", ScalarValue::Float32(Some(1.5))),
            (Type::FLOAT8, "-Infinity", ScalarValue::Float64(Some(f64::NEG_INFINITY))),
            (Type::FLOAT8, "1e-300", ScalarValue::Float64(Some(1e-300))),
            (Type::NUMERIC, "12.30", ScalarValue::Decimal128(Some(1230), 4, 2)),
            (Type::NUMERIC, "-0.001", ScalarValue::Decimal128(Some(-1), 3, 3)),
            (Type::NUMERIC, "1.5e3", ScalarValue::Decimal128(Some(1500), 4, 0)),
            (Type::NUMERIC, "1E-2", ScalarValue::Decimal128(Some(1), 2, 2)),
            (Type::NUMERIC, " 007 ", ScalarValue::Decimal128(Some(7), 1, 0)),
            (Type::NUMERIC, "-0", ScalarValue::Decimal128(Some(0), 1, 0)),
            (Type::NUMERIC, "-Infinity", ScalarValue::Float64(Some(f64::NEG_INFINITY))),
            (
                Type::NUMERIC,
                "12345678901234567890123456789012345678",
                ScalarValue::Decimal128(Some("12345678901234567890123456789012345678".parse().unwrap()), 38, 0),
            ),
            (
                Type::NUMERIC,
                "123456789012345678901234567890123456789.5",
                ScalarValue::Float64(Some(123456789012345678901234567890123456789.5)),
            ),
            (Type::TEXT, "it''s ", ScalarValue::Utf8(Some("it''s ".into()))),
            (Type::VARCHAR, "v", ScalarValue::Utf8(Some("v".into()))),
            (Type::BPCHAR, "b", ScalarValue::Utf8(Some("b".into()))),
            (Type::NAME, "n", ScalarValue::Utf8(Some("n".into()))),
            (Type::UNKNOWN, "u", ScalarValue::Utf8(Some("u".into()))),
            (Type::JSON, "{\"a\": 1}", ScalarValue::Utf8(Some("{\"a\": 1}".into()))),
            (Type::BYTEA, "\\x0102FF", ScalarValue::Binary(Some(vec![1, 2, 255]))),
            (Type::BYTEA, "\\x01 02", ScalarValue::Binary(Some(vec![1, 2]))),
            (Type::BYTEA, "a\\\\b\\001", ScalarValue::Binary(Some(b"a\\b\x01".to_vec()))),
            (Type::DATE, "2024-06-20", ScalarValue::Date32(Some(days(2024, 6, 20)))),
            (Type::DATE, "2000-01-01", ScalarValue::Date32(Some(10_957))),
            (Type::TIME, "10:00:00.5", ScalarValue::Time64Microsecond(Some(36_000_500_000))),
            (Type::TIME, "10:00", ScalarValue::Time64Microsecond(Some(36_000_000_000))),
            (Type::TIMESTAMP, "2026-01-02 03:04:05.12", ScalarValue::TimestampMicrosecond(Some(t), None)),
            (Type::TIMESTAMP, "2026-01-02T03:04:05.12+02", ScalarValue::TimestampMicrosecond(Some(t), None)),
            (
                Type::TIMESTAMP,
                "2026-01-02",
                ScalarValue::TimestampMicrosecond(Some(micros(2026, 1, 2, 0, 0, 0, 0)), None),
            ),
            (Type::TIMESTAMPTZ, "2026-01-02 05:04:05.12+02", ScalarValue::TimestampMicrosecond(Some(t), utc())),
            (Type::TIMESTAMPTZ, "2026-01-02 00:34:05.12-02:30", ScalarValue::TimestampMicrosecond(Some(t), utc())),
            (Type::TIMESTAMPTZ, "2026-01-02T03:04:05.12Z", ScalarValue::TimestampMicrosecond(Some(t), utc())),
            (Type::TIMESTAMPTZ, "2026-01-02 03:04:05.12", ScalarValue::TimestampMicrosecond(Some(t), utc())),
        ];
        for (ty, input, expected) in cases {
            assert_eq!(decode_text_one(ty.clone(), input).unwrap(), expected, "{ty} {input:?}");
        }
        let ScalarValue::Float64(Some(nan)) = decode_text_one(Type::NUMERIC, "NaN").unwrap() else {
            panic!("NaN numeric is not a Float64");
        };
        assert!(nan.is_nan());
    }
}
