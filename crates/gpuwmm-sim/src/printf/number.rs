//! The text of `printf`'s numeric conversions as C defines them: integers in four radixes with
//! precision as a minimum digit count, and doubles in fixed (`%f`), exponent (`%e`), general
//! (`%g`) and hexadecimal (`%a`) form. Decimal digits of doubles come from Rust's exact
//! conversion, which rounds ties to even on the exact binary value, as glibc does.

use super::Flags;

/// Writes `prefix` (sign, `0x`) and `body` into a field of the flags' width: left-justified,
/// zero-padded between them (where `zero_ok` and the `0` flag say so), or right-justified.
pub(crate) fn pad(f: &Flags, prefix: &[u8], body: &[u8], zero_ok: bool, out: &mut Vec<u8>) {
    let fill = f.width.saturating_sub(prefix.len() + body.len());
    if f.left {
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
        out.resize(out.len() + fill, b' ');
    } else if zero_ok && f.zero {
        out.extend_from_slice(prefix);
        out.resize(out.len() + fill, b'0');
        out.extend_from_slice(body);
    } else {
        out.resize(out.len() + fill, b' ');
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
    }
}

/// The sign a signed conversion writes: `-`, or `+`/space by the flags, or nothing.
fn sign(f: &Flags, negative: bool) -> &'static [u8] {
    match (negative, f.plus, f.space) {
        (true, _, _) => b"-",
        (false, true, _) => b"+",
        (false, false, true) => b" ",
        _ => b"",
    }
}

/// `%d` (`conversion` `d`: signed, `negative` with `magnitude`), `%u`, `%o`, `%x`, `%X`.
pub(crate) fn format_int(
    f: &Flags,
    negative: bool,
    magnitude: u64,
    conversion: u8,
    out: &mut Vec<u8>,
) {
    let mut digits = match conversion {
        b'o' => format!("{magnitude:o}"),
        b'x' => format!("{magnitude:x}"),
        b'X' => format!("{magnitude:X}"),
        _ => magnitude.to_string(),
    };
    match f.precision {
        Some(0) if magnitude == 0 => digits.clear(),
        Some(p) if p > digits.len() => digits.insert_str(0, &"0".repeat(p - digits.len())),
        _ => {}
    }
    if f.alt && conversion == b'o' && !digits.starts_with('0') {
        digits.insert(0, '0');
    }
    let mut prefix = match conversion {
        b'd' => sign(f, negative).to_vec(),
        _ => Vec::new(),
    };
    if f.alt && magnitude != 0 && matches!(conversion, b'x' | b'X') {
        prefix.extend_from_slice(if conversion == b'x' { b"0x" } else { b"0X" });
    }
    pad(f, &prefix, digits.as_bytes(), f.precision.is_none(), out);
}

/// `%f %F %e %E %g %G %a %A` of `x`.
pub(crate) fn format_float(f: &Flags, x: f64, conversion: u8, out: &mut Vec<u8>) {
    let upper = conversion.is_ascii_uppercase();
    let mut prefix = sign(f, x.is_sign_negative()).to_vec();
    if !x.is_finite() {
        let word = match (x.is_nan(), upper) {
            (true, false) => "nan",
            (true, true) => "NAN",
            (false, false) => "inf",
            (false, true) => "INF",
        };
        return pad(f, &prefix, word.as_bytes(), false, out);
    }
    let x = x.abs();
    let body = match conversion.to_ascii_lowercase() {
        b'f' => fixed(x, f.precision.unwrap_or(6), f.alt),
        b'e' => exponent(x, f.precision.unwrap_or(6), f.alt),
        b'g' => general(x, f.precision, f.alt),
        _ => {
            prefix.extend_from_slice(b"0x");
            hex(x, f.precision, f.alt)
        }
    };
    let (prefix, body) = match upper {
        true => (prefix.to_ascii_uppercase(), body.to_ascii_uppercase()),
        false => (prefix, body),
    };
    pad(f, &prefix, body.as_bytes(), true, out);
}

/// `%f` of a non-negative `x`: `precision` decimals; `#` keeps the point of a precision of 0.
fn fixed(x: f64, precision: usize, alt: bool) -> String {
    let mut s = format!("{x:.precision$}");
    if alt && precision == 0 {
        s.push('.');
    }
    s
}

/// `%e` of a non-negative `x`: one digit, `precision` decimals, and an exponent of at least two
/// digits with its sign.
fn exponent(x: f64, precision: usize, alt: bool) -> String {
    let (mantissa, exp) = split_exponent(x, precision);
    let point = if alt && precision == 0 { "." } else { "" };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}{point}e{sign}{:02}", exp.unsigned_abs())
}

/// Rust's `{:.precision$e}` of `x` as its mantissa and decimal exponent.
fn split_exponent(x: f64, precision: usize) -> (String, i32) {
    let s = format!("{x:.precision$e}");
    let (mantissa, exp) = s.split_once('e').expect("`{:e}` writes an exponent");
    (
        mantissa.to_string(),
        exp.parse().expect("`{:e}` writes a decimal exponent"),
    )
}

/// `%g` of a non-negative `x`: `%e` or `%f` by the exponent, with `precision` significant digits
/// (6 when absent, 1 when 0); trailing zeros go unless `#` keeps them.
fn general(x: f64, precision: Option<usize>, alt: bool) -> String {
    let p = precision.unwrap_or(6).max(1);
    let exp = split_exponent(x, p - 1).1;
    let mut s = match p as i64 > i64::from(exp) && exp >= -4 {
        true => fixed(x, (p as i64 - 1 - i64::from(exp)) as usize, alt),
        false => exponent(x, p - 1, alt),
    };
    if !alt {
        let end = s.find('e').unwrap_or(s.len());
        let kept = match s[..end].contains('.') {
            true => s[..end].trim_end_matches('0').trim_end_matches('.').len(),
            false => end,
        };
        s.replace_range(kept..end, "");
    }
    s
}

/// Hexadecimal digits of a double's 52-bit fraction.
const FRACTION_DIGITS: usize = 13;

/// `%a` of a non-negative `x` after its `0x`: the leading digit (0 for zero and subnormals), the
/// fraction's hex digits (all but trailing zeros, or `precision` of them, rounded to even) and
/// the binary exponent.
fn hex(x: f64, precision: Option<usize>, alt: bool) -> String {
    let bits = x.to_bits();
    let fraction = bits & ((1 << 52) - 1);
    let (mut lead, exp) = match (bits >> 52) as i32 {
        _ if x == 0.0 => (0, 0),
        0 => (0, -1022),
        e => (1, e - 1023),
    };
    let digits = match precision {
        None => format!("{fraction:013x}").trim_end_matches('0').to_string(),
        Some(p) if p >= FRACTION_DIGITS => format!("{fraction:013x}{}", "0".repeat(p - 13)),
        Some(p) => {
            let (kept, carry) = round_fraction(fraction, p, lead);
            lead += carry;
            match p {
                0 => String::new(),
                _ => format!("{kept:0p$x}"),
            }
        }
    };
    let point = if digits.is_empty() && !alt { "" } else { "." };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{lead}{point}{digits}p{sign}{}", exp.unsigned_abs())
}

/// The fraction rounded to `p` (< 13) hex digits, ties to even (the leading digit `lead` is the
/// last kept one when `p` is 0), and the carry into the leading digit.
fn round_fraction(fraction: u64, p: usize, lead: u64) -> (u64, u64) {
    let shift = 4 * (FRACTION_DIGITS - p) as u32;
    let mut kept = fraction >> shift;
    let rest = fraction & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let last = if p == 0 { lead } else { kept };
    if rest > half || (rest == half && last & 1 == 1) {
        kept += 1;
    }
    match kept >> (4 * p) {
        0 => (kept, 0),
        _ => (0, 1),
    }
}
