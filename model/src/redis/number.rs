//! Number parsing and formatting exactly as Redis does it (`util.c`: `string2ll`, `ld2string`;
//! `object.c`: `getDoubleFromObject`; `networking.c`: `addReplyDouble`).

/// `util.c` `string2ll`: a strict base-10 `long long`. No sign `+`, no spaces, no leading zeros,
/// no `-0`, at most 20 characters, no overflow.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Like C `strtod` over the whole input: `Some((value, underflowed_or_overflowed))` when every byte
/// was consumed. Accepts what glibc accepts: optional sign, decimal with optional exponent,
/// hexadecimal floats (`0x1.8p3`), `inf`/`infinity`/`nan` in any case, leading whitespace.
pub fn strtod_full(s: &[u8]) -> Option<(f64, bool)> {
    let text = std::str::from_utf8(s).ok()?;
    let body = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, unsigned) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    let lower = unsigned.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some((sign * f64::INFINITY, false));
    }
    if lower == "nan" {
        return Some((f64::NAN, false));
    }
    if let Some(hex) = lower.strip_prefix("0x") {
        return parse_hex_float(hex).map(|(v, range)| (sign * v, range));
    }
    let bytes = lower.as_bytes();
    let mut i = 0;
    let mut mantissa_digits = 0;
    let mut nonzero = false;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        nonzero |= bytes[i] != b'0';
        i += 1;
        mantissa_digits += 1;
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            nonzero |= bytes[i] != b'0';
            i += 1;
            mantissa_digits += 1;
        }
    }
    if mantissa_digits == 0 {
        return None;
    }
    if i < bytes.len() && bytes[i] == b'e' {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        let start = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > start {
            i = j;
        }
    }
    if i != bytes.len() {
        return None;
    }
    let v: f64 = lower.parse().ok()?;
    let out_of_range = v.is_infinite() || (v == 0.0 && nonzero) || v.is_subnormal();
    Some((sign * v, out_of_range))
}

fn parse_hex_float(hex: &str) -> Option<(f64, bool)> {
    let bytes = hex.as_bytes();
    let mut i = 0;
    let mut mantissa: f64 = 0.0;
    let mut digits = 0;
    let mut exp: i64 = 0;
    while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
        mantissa = mantissa * 16.0 + f64::from((bytes[i] as char).to_digit(16)?);
        i += 1;
        digits += 1;
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            mantissa = mantissa * 16.0 + f64::from((bytes[i] as char).to_digit(16)?);
            exp -= 4;
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < bytes.len() && bytes[i] == b'p' {
        let mut j = i + 1;
        let mut neg = false;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            neg = bytes[j] == b'-';
            j += 1;
        }
        let start = j;
        let mut e: i64 = 0;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            e = (e * 10 + i64::from(bytes[j] - b'0')).min(100_000);
            j += 1;
        }
        if j > start {
            exp += if neg { -e } else { e };
            i = j;
        }
    }
    if i != bytes.len() {
        return None;
    }
    let v = mantissa * 2f64.powi(exp.clamp(-100_000, 100_000) as i32);
    let out_of_range = v.is_infinite() || (v == 0.0 && mantissa != 0.0);
    Some((v, out_of_range))
}

/// `object.c` `getDoubleFromObject`: strtod over the whole string, no leading space, no NaN,
/// no overflow, no underflow to zero.
pub fn parse_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_c_space(s[0]) {
        return None;
    }
    let (v, out_of_range) = strtod_full(s)?;
    if v.is_nan() || (out_of_range && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `util.c` `string2ld`: as `parse_double` (with `strtold`, here in double precision), at most
/// 5 KiB.
pub fn parse_long_double(s: &[u8]) -> Option<f64> {
    if s.len() >= 5 * 1024 {
        return None;
    }
    parse_double(s)
}

/// C `printf("%.17g", d)` for a finite double, as `addReplyDouble` writes it in RESP2.
pub fn fmt_g17(d: f64) -> String {
    format_g(d, 17)
}

/// C `printf("%.<precision>g", d)`.
pub fn format_g(d: f64, precision: usize) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, d);
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_fraction_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_fraction_zeros(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The score/double reply of RESP2 `addReplyDouble`: `inf`, `-inf` or `%.17g`.
pub fn double_reply_text(d: f64) -> String {
    fmt_g17(d)
}

unsafe extern "C" {
    fn locksim_ld_check(s: *const u8, len: usize) -> i32;
    fn locksim_ld_add_human(
        value: *const u8,
        value_len: usize,
        incr: *const u8,
        incr_len: usize,
        out: *mut u8,
        out_len: usize,
    ) -> i32;
}

/// `MAX_LONG_DOUBLE_CHARS`: the buffer `ld2string` writes into.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// What `util.c` `string2ld` makes of a string, in C `long double` (`long_double.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongDouble {
    Invalid,
    Finite,
    Infinite,
}

/// `string2ld` in `long double` precision (its range is wider than a double's: `1e400` is valid).
pub fn check_long_double(s: &[u8]) -> LongDouble {
    // SAFETY: the C side reads `len` bytes of `s` and keeps no pointer.
    match unsafe { locksim_ld_check(s.as_ptr(), s.len()) } {
        0 => LongDouble::Invalid,
        1 => LongDouble::Finite,
        _ => LongDouble::Infinite,
    }
}

/// `incrbyfloatCommand`'s arithmetic: `value` (absent: 0) + `incr` in `long double`, as
/// `ld2string(LD_STR_HUMAN)` prints it. `None` if the sum is NaN or infinite (or an input is not
/// valid for [`check_long_double`]).
pub fn long_double_add_human(value: Option<&[u8]>, incr: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; MAX_LONG_DOUBLE_CHARS];
    let (value_ptr, value_len) = value.map_or((std::ptr::null(), 0), |v| (v.as_ptr(), v.len()));
    // SAFETY: the C side reads the given lengths of the inputs, writes at most `out.len()`
    // bytes into `out` and keeps no pointer.
    let len = unsafe {
        locksim_ld_add_human(
            value_ptr,
            value_len,
            incr.as_ptr(),
            incr.len(),
            out.as_mut_ptr(),
            out.len(),
        )
    };
    let len = usize::try_from(len).ok()?;
    out.truncate(len);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_is_strict() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-12"), Some(-12));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1.0",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn doubles_parse_like_strtod() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b".5"), Some(0.5));
        assert_eq!(parse_double(b"5."), Some(5.0));
        assert_eq!(parse_double(b"1e3"), Some(1000.0));
        for bad in [
            &b""[..],
            b"nan",
            b" 1",
            b"1e400",
            b"1e-400",
            b"abc",
            b"1x",
            b".",
        ] {
            assert_eq!(
                parse_double(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn formats_like_printf_g17() {
        assert_eq!(fmt_g17(1.0), "1");
        assert_eq!(fmt_g17(1.1), "1.1000000000000001");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(1e17), "1e+17");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g17(123456789.0), "123456789");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(format_g(0.35333609737146, 14), "0.35333609737146");
    }
}
