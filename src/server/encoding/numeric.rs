//! PostgreSQL's `numeric`: Arrow decimals (and UInt64) written as
//! `numeric_out` text or `numeric_send`'s base-10000 digits, and numerics read
//! back from text or binary as Decimal128 with the value's own precision and
//! scale, or Float64 where that cannot hold them.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{ArrowPrimitiveType, PrimitiveArray};
use datafusion::arrow::datatypes::Decimal256Type;
use datafusion::common::ScalarValue;

use super::value_writer::ValueWriter;

/// Largest precision and scale of Arrow's Decimal128.
const DECIMAL128_MAX_DIGITS: usize = 38;

pub(super) fn decimal_writer<'a, T: ArrowPrimitiveType>(
    a: &'a PrimitiveArray<T>,
    scale: i8,
    text: bool,
    to_i128: fn(T::Native) -> i128,
) -> ValueWriter<'a> {
    Box::new(move |i, buf| {
        let v = to_i128(a.value(i));
        let mut digits = [0u8; 39];
        let digits = decimal_digits(v.unsigned_abs(), &mut digits);
        write_numeric(buf, text, v < 0, digits, i32::from(scale));
        Ok(())
    })
}

/// Decimal256 goes through its decimal string, having no 256-bit integer type to take digits from.
pub(super) fn decimal256_writer(a: &PrimitiveArray<Decimal256Type>, scale: i8, text: bool) -> ValueWriter<'_> {
    let scale = i32::from(scale);
    Box::new(move |i, buf| {
        let v = a.value(i).to_string();
        let (negative, digits) = match v.strip_prefix('-') {
            Some(abs) => (true, abs),
            None => (false, v.as_str()),
        };
        write_numeric(buf, text, negative, digits.as_bytes(), scale);
        Ok(())
    })
}

/// ASCII digits of `v` without leading zeros, written at the end of `buf`.
fn decimal_digits(mut v: u128, buf: &mut [u8; 39]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[start..];
        }
    }
}

/// Writes the numeric `±digits × 10^-scale` (`digits` ASCII, no leading zeros).
fn write_numeric(buf: &mut BytesMut, text: bool, negative: bool, digits: &[u8], scale: i32) {
    if text {
        write_numeric_text(buf, negative, digits, scale);
    } else {
        write_numeric_binary(buf, negative, digits, scale);
    }
}

/// `numeric_out`: the exact value with exactly `scale` fractional digits.
fn write_numeric_text(buf: &mut BytesMut, negative: bool, digits: &[u8], scale: i32) {
    if negative {
        buf.put_u8(b'-');
    }
    if scale <= 0 {
        buf.put_slice(digits);
        if digits != b"0" {
            buf.put_bytes(b'0', scale.unsigned_abs() as usize);
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        buf.put_slice(int);
        buf.put_u8(b'.');
        buf.put_slice(frac);
    } else {
        buf.put_slice(b"0.");
        buf.put_bytes(b'0', scale - digits.len());
        buf.put_slice(digits);
    }
}

/// `numeric_send`: ndigits, weight, sign, dscale, then base-10000 digits
/// from the most significant, without leading or trailing zero digits.
fn write_numeric_binary(buf: &mut BytesMut, negative: bool, digits: &[u8], scale: i32) {
    const POW10: [i16; 4] = [1, 10, 100, 1000];
    // At most 77 decimal digits (Decimal256) span at most 21 groups.
    let mut groups = [0i16; 24];
    // Decimal exponent of the leading digit, and the power of 10000 holding it.
    let top_exp = digits.len() as i32 - 1 - scale;
    let weight = top_exp.div_euclid(4);
    let mut ngroups = 0;
    for (k, &c) in digits.iter().enumerate() {
        let exp = top_exp - k as i32;
        let group = (weight - exp.div_euclid(4)) as usize;
        groups[group] += i16::from(c - b'0') * POW10[exp.rem_euclid(4) as usize];
        ngroups = group + 1;
    }
    while ngroups > 0 && groups[ngroups - 1] == 0 {
        ngroups -= 1;
    }
    buf.put_i16(ngroups as i16);
    // PostgreSQL sends zero with weight 0 and positive sign.
    buf.put_i16(if ngroups == 0 { 0 } else { weight as i16 });
    buf.put_u16(if negative && ngroups > 0 { 0x4000 } else { 0 });
    buf.put_u16(scale.max(0) as u16);
    for &group in &groups[..ngroups] {
        buf.put_i16(group);
    }
}

/// Exact decimals become Decimal128 with the value's own precision and scale
/// (`12.30` is Decimal128(4, 2)); values needing more than 38 digits, NaN and
/// infinities become Float64. `None` for text that is no numeric.
pub(super) fn parse_numeric(t: &str) -> Option<ScalarValue> {
    let special = match t.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "infinity" | "+infinity" | "inf" | "+inf" => Some(f64::INFINITY),
        "-infinity" | "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    if let Some(v) = special {
        return Some(ScalarValue::Float64(Some(v)));
    }
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty()) || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Beyond any Decimal128, and the shifted digit strings would be huge.
    if exp.unsigned_abs() > 1000 {
        return t.parse().ok().map(|v| ScalarValue::Float64(Some(v)));
    }
    let shift = exp.unsigned_abs() as usize;
    let (int, frac) = if exp >= 0 {
        if shift <= frac.len() {
            (format!("{int}{}", &frac[..shift]), frac[shift..].to_owned())
        } else {
            (format!("{int}{frac}{}", "0".repeat(shift - frac.len())), String::new())
        }
    } else if shift <= int.len() {
        let split = int.len() - shift;
        (int[..split].to_owned(), format!("{}{frac}", &int[split..]))
    } else {
        (String::new(), format!("{}{int}{frac}", "0".repeat(shift - int.len())))
    };
    numeric_scalar(negative, &int, &frac)
}

/// A value in `numeric_recv`'s format (see [`write_numeric_binary`]) as the
/// text `numeric_out` prints for it: exactly `dscale` fractional digits, or
/// `NaN`, `Infinity`, `-Infinity`. Bind parameters and binary COPY both read
/// the value from this text, as they would a text-format one.
pub(crate) fn numeric_binary_text(raw: &[u8]) -> Result<String, String> {
    let invalid = |what: &str| format!("invalid binary numeric: {what}");
    let header = raw.get(..8).ok_or_else(|| invalid("too short"))?;
    let word = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let ndigits = usize::try_from(word(0) as i16).map_err(|_| invalid("negative length"))?;
    let weight = i64::from(word(2) as i16);
    let sign = word(4);
    let dscale = usize::from(word(6));
    if raw.len() != 8 + 2 * ndigits {
        return Err(invalid("length does not match the digit count"));
    }
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Ok("NaN".to_owned()),
        0xD000 => return Ok("Infinity".to_owned()),
        0xF000 => return Ok("-Infinity".to_owned()),
        _ => return Err(invalid("bad sign")),
    }
    let mut digits = String::with_capacity(4 * ndigits);
    for pair in raw[8..].chunks_exact(2) {
        let digit = u16::from_be_bytes([pair[0], pair[1]]);
        if digit > 9999 {
            return Err(invalid("digit out of range"));
        }
        let _ = write!(digits, "{digit:04}");
    }
    // Position of the decimal point within `digits`.
    let point = (weight + 1) * 4;
    let (int, mut frac) = if point <= 0 {
        (String::new(), format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)))
    } else if point as usize >= digits.len() {
        let zeros = "0".repeat(point as usize - digits.len());
        (format!("{digits}{zeros}"), String::new())
    } else {
        let (int, frac) = digits.split_at(point as usize);
        (int.to_owned(), frac.to_owned())
    };
    if frac.len() > dscale {
        frac.truncate(dscale);
    } else {
        frac.extend(std::iter::repeat_n('0', dscale - frac.len()));
    }
    let int = match int.trim_start_matches('0') {
        "" => "0",
        int => int,
    };
    let sign = if sign == 0x4000 { "-" } else { "" };
    Ok(if frac.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{frac}") })
}

/// `±int.frac`, both ASCII digit strings (possibly empty), as Decimal128 when
/// its digits and scale fit 38 digits, else as Float64.
fn numeric_scalar(negative: bool, int: &str, frac: &str) -> Option<ScalarValue> {
    let scale = frac.len();
    let significant: Vec<u8> = int.bytes().chain(frac.bytes()).skip_while(|&c| c == b'0').collect();
    let precision = significant.len().max(scale).max(1);
    if precision <= DECIMAL128_MAX_DIGITS {
        let magnitude = significant.iter().fold(0i128, |acc, &c| acc * 10 + i128::from(c - b'0'));
        let value = if negative { -magnitude } else { magnitude };
        return Some(ScalarValue::Decimal128(Some(value), precision as u8, scale as i8));
    }
    let sign = if negative { "-" } else { "" };
    format!("{sign}0{int}.{frac}0").parse().ok().map(|v| ScalarValue::Float64(Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Decimal128Array, Decimal256Array};
    use datafusion::arrow::datatypes::i256;

    use super::super::test_support::{binary, hex, hexes, text, texts};

    #[test]
    fn encodes_numerics_like_numeric_send() {
        let decimal = |values: Vec<Option<i128>>, p: u8, s: i8| -> ArrayRef {
            Arc::new(Decimal128Array::from(values).with_precision_and_scale(p, s).unwrap())
        };
        let max38: i128 = "12345678901234567890123456789012345678".parse().unwrap();
        // (array, text, numeric_send output from PostgreSQL 15)
        let cases = [
            (decimal(vec![Some(1230)], 10, 2), "12.30", "0002000000000002000c0bb8"),
            (decimal(vec![Some(1)], 4, 3), "0.001", "0001ffff00000003000a"),
            (decimal(vec![Some(-1_000_000)], 7, 0), "-1000000", "00010001400000000064"),
            (decimal(vec![Some(0)], 5, 2), "0.00", "0000000000000002"),
            (decimal(vec![Some(0)], 10, 0), "0", "0000000000000000"),
            (decimal(vec![Some(5)], 2, 1), "0.5", "0001ffff000000011388"),
            (decimal(vec![Some(1500)], 4, 0), "1500", "000100000000000005dc"),
            (decimal(vec![Some(123)], 5, -2), "12300", "0002000100000000000108fc"),
            (
                decimal(vec![Some(max38)], 38, 0),
                "12345678901234567890123456789012345678",
                "000a000900000000000c0d801ed204d2162e23340d801ed204d2162e",
            ),
            (decimal(vec![Some(-1)], 38, 38), "-0.00000000000000000000000000000000000001", "0001fff6400000260064"),
        ];
        for (array, expected_text, expected_binary) in cases {
            assert_eq!(text(array.clone()), texts(&[expected_text]), "{expected_text}");
            assert_eq!(binary(array), hexes(&[expected_binary]), "{expected_text}");
        }
        assert_eq!(text(decimal(vec![None], 10, 2)), vec![None]);
        assert_eq!(binary(decimal(vec![None], 10, 2)), vec![None]);

        let digits76 = "1234567890123456789012345678901234567890123456789012345678901234567890123456";
        let wide: ArrayRef = Arc::new(
            Decimal256Array::from(vec![
                i256::from_string(&format!("-{digits76}")).unwrap(),
                i256::from_string("99999999999999999999999999999999999999").unwrap(),
            ])
            .with_precision_and_scale(76, 10)
            .unwrap(),
        );
        let (int, frac) = digits76.split_at(66);
        assert_eq!(text(wide.clone()), texts(&[&format!("-{int}.{frac}"), "9999999999999999999999999999.9999999999"]));
        let wide_scale0: ArrayRef = Arc::new(
            Decimal256Array::from(vec![i256::from_string("99999999999999999999999999999999999999").unwrap()])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        assert_eq!(binary(wide_scale0), hexes(&["000a0009000000000063270f270f270f270f270f270f270f270f270f"]));
        assert_eq!(
            binary(wide)[0],
            Some(hex(
                "001400104000000a000c0d801ed204d2162e23340d801ed204d2162e23340d801ed204d2162e23340d801ed204d215e0"
            ))
        );
    }

    #[test]
    fn binary_numerics_read_as_text() {
        let numeric_text = |words: &[i16]| {
            let raw: Vec<u8> = words.iter().flat_map(|v| v.to_be_bytes()).collect();
            numeric_binary_text(&raw)
        };
        // 12345.678: digits 1, 2345, 6780; weight 1; scale 3.
        assert_eq!(numeric_text(&[3, 1, 0, 3, 1, 2345, 6780]).unwrap(), "12345.678");
        assert_eq!(numeric_text(&[1, -1, 0x4000, 2, 500]).unwrap(), "-0.05");
        assert_eq!(numeric_text(&[0, 0, 0, 0]).unwrap(), "0");
    }
}
