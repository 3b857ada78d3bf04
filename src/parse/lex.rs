//! Byte-level scanning shared by the grammar, the tag dialects and the
//! sample's iterators: trimming a line, splitting at an ASCII delimiter,
//! spotting control characters, and the fast path for plain decimals.
//!
//! These are the only pieces more than one of those files needs; keeping them
//! here lets the arrows point one way (grammar and tags use the model, all
//! three use this file, this file uses nothing).

/// Strips ASCII spaces, tabs, `\r` and `\n` from both ends.
pub(super) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// `s.split_once(b)` for an ASCII byte, without the general char searcher
/// (statsd fields are short; a plain loop is faster). Slicing is at the ASCII
/// delimiter, so always on a char boundary.
/// [`trim`] for text (the trimmed bytes are ASCII).
#[inline]
pub(super) fn trim_str(s: &str) -> &str {
    let b = s.as_bytes();
    let blank = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut start = 0;
    while start < b.len() && blank(b[start]) {
        start += 1;
    }
    let mut end = b.len();
    while end > start && blank(b[end - 1]) {
        end -= 1;
    }
    &s[start..end]
}

#[inline]
pub(super) fn split2(s: &str, b: u8) -> Option<(&str, &str)> {
    let i = s.bytes().position(|c| c == b)?;
    Some((&s[..i], &s[i + 1..]))
}

/// Like [`split2`], but with no delimiter the whole string is the head.
#[inline]
pub(super) fn split_or_all(s: &str, b: u8) -> (&str, &str) {
    match split2(s, b) {
        Some(parts) => parts,
        None => (s, ""),
    }
}

#[inline]
fn is_control(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

#[inline]
pub(super) fn has_control(s: &str) -> bool {
    s.bytes().any(is_control)
}

/// Exact powers of ten up to 10^15 (all exactly representable in `f64`).
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Fast path for the plain decimals statsd clients send (`1`, `-3`, `12.5`,
/// `0.000100`): at most 15 digits, no exponent. The digits form an integer
/// below 2^53 and the divisor is an exact power of ten, so one IEEE division
/// gives the correctly rounded result, identical to `str::parse::<f64>`
/// (Clinger's fast path). Anything else returns `None` and takes the
/// general parser.
#[inline]
pub(super) fn fast_decimal(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut mant: u64 = 0;
    let mut n_digits = 0usize;
    let mut frac_digits = 0usize;
    let mut seen_dot = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                n_digits += 1;
                if n_digits > 15 {
                    return None;
                }
                mant = mant * 10 + u64::from(b - b'0');
                frac_digits += usize::from(seen_dot);
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return None,
        }
    }
    if n_digits == 0 {
        return None;
    }
    // Exact: mant < 10^15 < 2^53.
    #[allow(clippy::cast_precision_loss)]
    let v = mant as f64 / POW10[frac_digits];
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_decimal_agrees_with_std() {
        let cases = [
            "0",
            "-0",
            "+0",
            "1",
            "-1",
            "+3",
            "12.5",
            "12.500000",
            "0.000100",
            "0.1",
            "0.3",
            "123456789012345",
            "-99999999999999.9",
            ".5",
            "5.",
            "-.5",
            "0.000000000000001",
            "9007199254740993",
            "1234567890123456",
            ".",
            "-",
            "+",
            "",
            "1.2.3",
            "1e3",
            "--1",
            "0.1234567890123456789",
        ];
        for c in cases {
            let fast = fast_decimal(c.as_bytes());
            let std = c.parse::<f64>().ok();
            if let Some(f) = fast {
                assert_eq!(Some(f.to_bits()), std.map(f64::to_bits), "{c}");
            }
        }
        // Exhaustive over short strings of the decimal alphabet.
        let alphabet = b"0159.-+";
        let mut buf = Vec::new();
        for len in 1..=5u32 {
            for mut n in 0..7usize.pow(len) {
                buf.clear();
                for _ in 0..len {
                    buf.push(alphabet[n % 7]);
                    n /= 7;
                }
                let s = std::str::from_utf8(&buf).unwrap();
                match fast_decimal(&buf) {
                    Some(f) => assert_eq!(
                        Some(f.to_bits()),
                        s.parse::<f64>().ok().map(f64::to_bits),
                        "{s}"
                    ),
                    None => assert!(
                        s.parse::<f64>().is_err() || s.len() > 15,
                        "{s} missed the fast path"
                    ),
                }
            }
        }
    }

    #[test]
    fn trim_only_strips_blank_bytes() {
        assert_eq!(trim(b" \t\ra:1|c\r\n"), b"a:1|c");
        assert_eq!(trim(b"a: 1|c"), b"a: 1|c");
        assert_eq!(trim(b"\r\r"), b"");
        assert_eq!(trim(b""), b"");
    }
}
