//! Bytes from the network, made safe to show in a log line or an error
//! message.
//!
//! A statsd datagram, an HTTP header or a reply from Redis can hold any
//! byte. Written to a log as they are, `\r` rewrites the line an operator is
//! reading, `\n` forges a log entry of the attacker's choosing and `ESC [2J`
//! clears the terminal. The log formatter (tracing-subscriber) escapes a few
//! of these in the message, but not `\r` or `\n`, and nothing in the other
//! fields. So every log site that shows such bytes wraps them in
//! [`Escaped`], which writes:
//!
//! * printable ASCII as is, except `\` which is doubled, so the output reads
//!   back to the exact input ([`Escaped`]'s tests undo it);
//! * `\t`, `\n`, `\r` as those two-character escapes, other ASCII control
//!   bytes and DEL as `\xNN`;
//! * valid UTF-8 as is, except characters Rust's `char::escape_debug` would
//!   not print bare: C1 controls (`\u{9b}` is a one-character CSI), format
//!   characters such as the bidi override `\u{202e}`, line and paragraph
//!   separators, combining marks;
//! * each byte of invalid UTF-8 as `\xNN`;
//! * at most [`MAX_SHOWN`] bytes of input (or the cap given), then
//!   `... (N more bytes)`.
//!
//! The output never holds a control character, whatever the input. It is
//! built as it is written (a `Display`), so a log call that is filtered out
//! costs nothing.

use std::fmt::{self, Write as _};

/// Bytes of input shown by [`Escaped::new`]: enough for any statsd line the
/// parser accepts (a 256-byte name and a few tags), short enough that a
/// 64 KiB datagram does not become a 256 KiB log line.
pub const MAX_SHOWN: usize = 200;

/// Untrusted bytes, written escaped and capped; see the [module docs](self).
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a> {
    bytes: &'a [u8],
    cap: usize,
}

impl<'a> Escaped<'a> {
    /// `bytes`, at most [`MAX_SHOWN`] of them shown.
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Escaped::with_cap(bytes, MAX_SHOWN)
    }

    /// `bytes`, at most `cap` of them shown.
    #[must_use]
    pub fn with_cap(bytes: &'a [u8], cap: usize) -> Self {
        Escaped { bytes, cap }
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = &self.bytes[..self.bytes.len().min(self.cap)];
        for chunk in shown.utf8_chunks() {
            for c in chunk.valid().chars() {
                write_char(f, c)?;
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        if self.bytes.len() > shown.len() {
            write!(f, "... ({} more bytes)", self.bytes.len() - shown.len())?;
        }
        Ok(())
    }
}

fn write_char(f: &mut fmt::Formatter<'_>, c: char) -> fmt::Result {
    match c {
        '\\' => f.write_str("\\\\"),
        '\t' => f.write_str("\\t"),
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        ' '..='~' => f.write_char(c),
        '\0'..='\x7f' => write!(f, "\\x{:02x}", u32::from(c)),
        // Beyond ASCII: Rust's own rule for what may be shown bare (it
        // escapes every control, format, separator, private-use and
        // unassigned character, and combining marks, as `\u{..}`).
        _ => {
            let mut e = c.escape_debug();
            if e.len() == 1 {
                f.write_char(c)
            } else {
                e.try_for_each(|x| f.write_char(x))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn show(b: &[u8]) -> String {
        Escaped::new(b).to_string()
    }

    /// Undoes the escaping (for output that was not capped): the proof
    /// that nothing is lost or ambiguous.
    fn unescape(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut it = s.chars();
        while let Some(c) = it.next() {
            if c != '\\' {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                continue;
            }
            match it.next().expect("a lone backslash") {
                '\\' => out.push(b'\\'),
                't' => out.push(b'\t'),
                'n' => out.push(b'\n'),
                'r' => out.push(b'\r'),
                'x' => {
                    let hex: String = it.by_ref().take(2).collect();
                    out.push(u8::from_str_radix(&hex, 16).expect("two hex digits"));
                }
                'u' => {
                    assert_eq!(it.next(), Some('{'));
                    let hex: String = it.by_ref().take_while(|&c| c != '}').collect();
                    let c = char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap();
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                other => panic!("unknown escape \\{other} in {s:?}"),
            }
        }
        out
    }

    #[test]
    fn a_forged_log_line_and_terminal_codes_are_shown_as_escapes() {
        let line = b"x\r2026-01-01T00:00:00Z  INFO rollstat: all clear\x1b[2J\x07:1|c";
        assert_eq!(
            show(line),
            "x\\r2026-01-01T00:00:00Z  INFO rollstat: all clear\\x1b[2J\\x07:1|c"
        );
        assert_eq!(show(b"a\nb\tc\0d\x7f"), "a\\nb\\tc\\x00d\\x7f");
    }

    #[test]
    fn invalid_utf8_is_shown_byte_by_byte_and_valid_text_as_is() {
        assert_eq!(show(b"a\xffb\xc3"), "a\\xffb\\xc3");
        assert_eq!(show("caf\u{e9} \u{65e5}".as_bytes()), "caf\u{e9} \u{65e5}");
    }

    #[test]
    fn c1_controls_bidi_overrides_and_line_separators_are_escaped() {
        assert_eq!(show("\u{9b}2J".as_bytes()), "\\u{9b}2J");
        assert_eq!(show("a\u{202e}b".as_bytes()), "a\\u{202e}b");
        assert_eq!(show("a\u{2028}b\u{85}".as_bytes()), "a\\u{2028}b\\u{85}");
        assert_eq!(show("\u{feff}".as_bytes()), "\\u{feff}");
    }

    #[test]
    fn backslashes_are_doubled_so_escapes_cannot_be_forged() {
        assert_eq!(show(b"a\\x1b"), "a\\\\x1b");
        assert_eq!(unescape(&show(b"a\\x1b\x1b")), b"a\\x1b\x1b");
    }

    #[test]
    fn long_input_is_capped_and_says_how_much_was_left_out() {
        let long = vec![b'a'; 1000];
        assert_eq!(
            show(&long),
            format!("{}... (800 more bytes)", "a".repeat(200))
        );
        assert_eq!(
            Escaped::with_cap(b"abcdef", 2).to_string(),
            "ab... (4 more bytes)"
        );
        // Every byte escaped: still bounded by the cap on input.
        assert!(show(&[0u8; 100_000]).len() <= 4 * MAX_SHOWN + 40);
    }

    proptest! {
        #[test]
        fn the_output_never_holds_a_control_character(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let out = show(&bytes);
            prop_assert!(!out.chars().any(char::is_control), "{out:?}");
        }

        #[test]
        fn unicode_text_never_shows_a_control_character(s in "\\PC*|[\\u{0}-\\u{3000}]*") {
            let out = Escaped::with_cap(s.as_bytes(), usize::MAX).to_string();
            prop_assert!(!out.chars().any(char::is_control), "{out:?}");
            prop_assert_eq!(unescape(&out), s.as_bytes());
        }

        #[test]
        fn printable_ascii_without_backslashes_is_shown_unchanged(s in "[ -\\[\\]-~]{0,200}") {
            prop_assert_eq!(show(s.as_bytes()), s);
        }

        #[test]
        fn escaping_loses_nothing(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(unescape(&show(&bytes)), bytes);
        }
    }
}
