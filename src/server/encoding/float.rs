//! `float4out`/`float8out`: PostgreSQL prints the shortest digits that read
//! back as the same float, but its Ryu port differs from Rust's shortest
//! formatting at the ends of the rounding interval and on ties, and it uses
//! its own switch between fixed and exponent notation.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use bytes::{BufMut, BytesMut};

use super::value_writer::put_display;

/// Formats short values without a heap allocation.
#[derive(Default)]
struct StackStr {
    buf: [u8; 32],
    len: usize,
}

impl StackStr {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for StackStr {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.buf.get_mut(self.len..end).ok_or(fmt::Error)?.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A finite nonzero float as `m2 × 2^e2`. `lower_closer` marks a
/// power-of-two mantissa, whose next smaller neighbour is half as far away.
pub(super) struct BinaryFloat {
    m2: u64,
    e2: i32,
    lower_closer: bool,
}

/// The two float widths, as PostgreSQL prints them.
pub(super) trait PgFloat: Copy + fmt::LowerExp + FromStr {
    /// Decimal exponents in `-4..FIXED_BELOW` print in fixed notation.
    const FIXED_BELOW: i32;
    /// Significant digits that always identify a value.
    const MAX_DIGITS: usize;
    fn widen(self) -> f64;
    fn binary(self) -> BinaryFloat;
}

impl PgFloat for f64 {
    const FIXED_BELOW: i32 = 15;
    const MAX_DIGITS: usize = 17;

    fn widen(self) -> f64 {
        self
    }

    fn binary(self) -> BinaryFloat {
        let bits = self.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as i32;
        let mantissa = bits & ((1 << 52) - 1);
        BinaryFloat {
            m2: if exponent == 0 { mantissa } else { mantissa | (1 << 52) },
            e2: exponent.max(1) - 1075,
            lower_closer: mantissa == 0 && exponent > 1,
        }
    }
}

impl PgFloat for f32 {
    const FIXED_BELOW: i32 = 6;
    const MAX_DIGITS: usize = 9;

    fn widen(self) -> f64 {
        f64::from(self)
    }

    fn binary(self) -> BinaryFloat {
        let bits = self.to_bits();
        let exponent = ((bits >> 23) & 0xff) as i32;
        let mantissa = u64::from(bits & ((1 << 23) - 1));
        BinaryFloat {
            m2: if exponent == 0 { mantissa } else { mantissa | (1 << 23) },
            e2: exponent.max(1) - 150,
            lower_closer: mantissa == 0 && exponent > 1,
        }
    }
}

/// `digits × 10^exp`.
#[derive(Clone, Copy, PartialEq)]
struct Decimal {
    digits: u64,
    exp: i32,
}

impl Decimal {
    /// Parses Rust's `{:e}` output (`-1.25e-3`), ignoring the sign.
    fn from_scientific(args: fmt::Arguments<'_>) -> Self {
        let mut s = StackStr::default();
        let _ = s.write_fmt(args);
        let s = s.as_str().trim_start_matches('-');
        let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = int.bytes().chain(frac.bytes()).fold(0u64, |acc, c| acc * 10 + u64::from(c - b'0'));
        Decimal { digits, exp: exp.parse::<i32>().unwrap_or(0) - frac.len() as i32 }
    }

    fn normalized(mut self) -> Self {
        while self.digits != 0 && self.digits.is_multiple_of(10) {
            self.digits /= 10;
            self.exp += 1;
        }
        self
    }

    fn len(self) -> usize {
        self.digits.checked_ilog10().map_or(1, |l| l as usize + 1)
    }

    /// Whether the value is exactly `c × 2^f` (`c` odd).
    fn equals_dyadic(self, c: u64, f: i32) -> bool {
        // The odd part of one side holds 5^|exp|, and the other side's odd
        // part is below 2^64, so larger exponents never match.
        if self.exp.unsigned_abs() > 27 {
            return false;
        }
        let pow5 = 5u128.pow(self.exp.unsigned_abs());
        if self.exp >= 0 {
            let lhs = u128::from(self.digits) * pow5;
            let t = self.exp - f;
            if t >= 0 { shl_exact(lhs, t) == Some(u128::from(c)) } else { shl_exact(u128::from(c), -t) == Some(lhs) }
        } else {
            let s = f - self.exp;
            s >= 0 && shl_exact(u128::from(c) * pow5, s) == Some(u128::from(self.digits))
        }
    }
}

fn shl_exact(v: u128, shift: i32) -> Option<u128> {
    let shift = u32::try_from(shift).ok()?;
    (shift < 128 && v.leading_zeros() >= shift).then(|| v << shift)
}

/// Whether `d` lies exactly on an end of `bin`'s rounding interval: halfway
/// to the next float above or below.
fn on_rounding_bound(bin: &BinaryFloat, d: Decimal) -> bool {
    let (lower_c, lower_f) = if bin.lower_closer { (4 * bin.m2 - 1, bin.e2 - 2) } else { (2 * bin.m2 - 1, bin.e2 - 1) };
    d.equals_dyadic(2 * bin.m2 + 1, bin.e2 - 1) || d.equals_dyadic(lower_c, lower_f)
}

/// The digits PostgreSQL's Ryu port (`d2s.c`, `f2s.c`) picks: the shortest
/// decimal strictly inside the rounding interval (it is built with
/// `acceptBounds = false`) and, among those, the nearest, ties to even. Rust's
/// shortest formatting differs only in accepting the interval's ends and
/// rounding ties up, so its length is where the search starts.
fn pg_shortest<F: PgFloat>(v: F) -> Decimal {
    let abs = v.widen().abs();
    let shortest = Decimal::from_scientific(format_args!("{v:e}")).normalized();
    let bin = v.binary();
    let inside = |d: Decimal| {
        let d = d.normalized();
        let round_trips = d == shortest || {
            let mut s = StackStr::default();
            let _ = write!(s, "{}e{}", d.digits, d.exp);
            s.as_str().parse::<F>().is_ok_and(|p| p.widen() == abs)
        };
        round_trips && !on_rounding_bound(&bin, d)
    };
    for len in shortest.len()..=F::MAX_DIGITS {
        // `len` digits, correctly rounded with ties to even.
        let nearest = Decimal::from_scientific(format_args!("{abs:.prec$e}", prec = len - 1));
        let below = Decimal { digits: nearest.digits - 1, ..nearest };
        let above = Decimal { digits: nearest.digits + 1, ..nearest };
        if let Some(found) = [nearest, below, above].into_iter().find(|&d| inside(d)) {
            return found.normalized();
        }
    }
    shortest
}

/// `float4out`/`float8out` with the default `extra_float_digits = 1`: the
/// shortest digits that round-trip, in fixed notation for decimal exponents
/// in `-4..FIXED_BELOW` and as `d.ddde±XX` otherwise.
pub(super) fn write_float<F: PgFloat>(buf: &mut BytesMut, v: F) {
    let wide = v.widen();
    if wide.is_nan() {
        buf.put_slice(b"NaN");
        return;
    }
    if wide.is_infinite() {
        buf.put_slice(if wide > 0.0 { "Infinity" } else { "-Infinity" }.as_bytes());
        return;
    }
    if wide.is_sign_negative() {
        buf.put_u8(b'-');
    }
    if wide == 0.0 {
        buf.put_u8(b'0');
        return;
    }
    let decimal = pg_shortest(v);
    let mut s = StackStr::default();
    let _ = write!(s, "{}", decimal.digits);
    let digits = s.as_str().as_bytes();
    let exp = decimal.exp + digits.len() as i32 - 1;
    if (-4..F::FIXED_BELOW).contains(&exp) {
        if exp < 0 {
            buf.put_slice(b"0.");
            buf.put_bytes(b'0', (-exp - 1) as usize);
            buf.put_slice(digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                buf.put_slice(digits);
                buf.put_bytes(b'0', int_len - digits.len());
            } else {
                buf.put_slice(&digits[..int_len]);
                buf.put_u8(b'.');
                buf.put_slice(&digits[int_len..]);
            }
        }
    } else {
        buf.put_slice(&digits[..1]);
        if digits.len() > 1 {
            buf.put_u8(b'.');
            buf.put_slice(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        put_display(buf, format_args!("e{sign}{:02}", exp.unsigned_abs()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, ArrowPrimitiveType, Float16Array, Float32Array, Float64Array};
    use datafusion::arrow::datatypes::Float16Type;

    use super::super::test_support::{binary, hex, hexes, text, texts};

    #[test]
    fn encodes_float8_like_postgres() {
        let cases: [(f64, &str); 23] = [
            // PostgreSQL excludes the rounding interval's ends (Rust prints
            // -6.57825916903112e17) and rounds exact ties to even.
            (-6.57825916903112e+17, "-6.578259169031119e+17"),
            (-68_659_681_752_636_816.0, "-6.8659681752636816e+16"),
            (7.120236347223045e-307, "7.120236347223045e-307"),
            (181_705_388_398_854.62, "181705388398854.62"),
            (2_277_415_065_412.531_2, "2277415065412.5312"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e300, "1e+300"),
            (-1e-300, "-1e-300"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
            (1e15, "1e+15"),
            (1e14, "100000000000000"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0"),
            (0.0, "0"),
            (1e20, "1e+20"),
            (1e-20, "1e-20"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        let array: ArrayRef = Arc::new(Float64Array::from(cases.iter().map(|c| c.0).collect::<Vec<_>>()));
        let expected: Vec<_> = cases.iter().map(|c| c.1).collect();
        assert_eq!(text(array.clone()), texts(&expected));
        let expected_binary: Vec<_> = cases.iter().map(|c| Some(c.0.to_be_bytes().to_vec())).collect();
        assert_eq!(binary(array), expected_binary);
        assert_eq!(binary(Arc::new(Float64Array::from(vec![-0.0]))), hexes(&["8000000000000000"]));
    }

    #[test]
    fn encodes_float4_like_postgres() {
        let cases: [(f32, &str); 17] = [
            (1.216_368_6e8, "1.21636864e+08"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (3.4e38, "3.4e+38"),
            (1e-45, "1e-45"),
            (16777216.0, "1.6777216e+07"),
            (2.5, "2.5"),
            (100.0, "100"),
            (1e5, "100000"),
            (999999.0, "999999"),
            (f32::NAN, "NaN"),
            (f32::NEG_INFINITY, "-Infinity"),
        ];
        let array: ArrayRef = Arc::new(Float32Array::from(cases.iter().map(|c| c.0).collect::<Vec<_>>()));
        let expected: Vec<_> = cases.iter().map(|c| c.1).collect();
        assert_eq!(text(array.clone()), texts(&expected));
        let expected_binary: Vec<_> = cases.iter().map(|c| Some(c.0.to_be_bytes().to_vec())).collect();
        assert_eq!(binary(array), expected_binary);

        let half: ArrayRef = Arc::new(Float16Array::from(vec![Some(half_of(1.5)), None]));
        assert_eq!(text(half.clone()), vec![Some("1.5".into()), None]);
        assert_eq!(binary(half), vec![Some(hex("3fc00000")), None]);
    }

    fn half_of(v: f32) -> <Float16Type as ArrowPrimitiveType>::Native {
        <Float16Type as ArrowPrimitiveType>::Native::from_f32(v)
    }
}
