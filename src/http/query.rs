//! Query strings read strictly: every `%` escape must be two hex digits and
//! every decoded name and value must be UTF-8, or the request is refused
//! with an error naming the parameter.
//!
//! The usual reader (`form_urlencoded`, behind axum's `Query`) is lossy: it
//! leaves a bad escape as it is and turns bytes that are not UTF-8 into
//! U+FFFD, so `key=user%FF` and `key=user%FE` both read as `user\u{FFFD}`
//! and would share one rate-limit key. Here they are errors.
//! As in HTML forms, `+` is a space (`%2B` is a plus sign).

/// Why a query string cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// A `%` not followed by two hex digits.
    #[error("`{param}` has a bad percent-escape at byte {at} of its value: `%` must be followed by two hex digits (write a literal `%` as `%25`)")]
    BadEscape {
        /// The parameter (its raw name if the name itself is bad).
        param: String,
        /// Where the `%` is, in the raw value (or name).
        at: usize,
    },
    /// The decoded bytes are not UTF-8.
    #[error("`{param}` is not UTF-8 once percent-decoded (byte {at} of the decoded value); send UTF-8 text, each byte of a multi-byte character percent-encoded")]
    NotUtf8 {
        /// The parameter (its raw name if the name itself is bad).
        param: String,
        /// The first byte that is not part of a UTF-8 character.
        at: usize,
    },
}

/// Longest parameter name quoted in an error.
const MAX_NAME_SHOWN: usize = 64;

/// The `name=value` pairs of `raw` (the query string without `?`), decoded,
/// in order. Empty segments (`a=1&&b=2`) are skipped; a segment without `=`
/// has an empty value.
///
/// # Errors
///
/// [`QueryError`] for the first parameter whose name or value does not
/// decode.
pub fn pairs(raw: &str) -> Result<Vec<(String, String)>, QueryError> {
    let mut out = Vec::new();
    for segment in raw.split('&').filter(|s| !s.is_empty()) {
        let (name, value) = segment.split_once('=').unwrap_or((segment, ""));
        let shown = || {
            let mut s: String = name.chars().take(MAX_NAME_SHOWN).collect();
            if s.len() < name.len() {
                s.push_str("...");
            }
            s
        };
        let name = decode(name).map_err(|e| e.named(shown()))?;
        let value = decode(value).map_err(|e| e.named(name.clone()))?;
        out.push((name, value));
    }
    Ok(out)
}

/// A decoding failure before the parameter is known.
enum Bad {
    Escape(usize),
    Utf8(usize),
}

impl Bad {
    fn named(self, param: String) -> QueryError {
        match self {
            Bad::Escape(at) => QueryError::BadEscape { param, at },
            Bad::Utf8(at) => QueryError::NotUtf8 { param, at },
        }
    }
}

fn decode(s: &str) -> Result<String, Bad> {
    let b = s.as_bytes();
    if !b.iter().any(|&c| c == b'%' || c == b'+') {
        return Ok(s.to_owned());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
                match (hex(i + 1), hex(i + 2)) {
                    (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                    _ => return Err(Bad::Escape(i)),
                }
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|e| Bad::Utf8(e.utf8_error().valid_up_to()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(raw: &str) -> Result<(String, String), QueryError> {
        pairs(raw).map(|mut v| v.remove(0))
    }

    #[test]
    fn valid_escapes_and_plus_decode_as_forms_do() {
        assert_eq!(
            pairs("key=a+b%2Bc&n=%31%30&&flag&k%65y=%C3%A9").unwrap(),
            [
                ("key".into(), "a b+c".into()),
                ("n".into(), "10".into()),
                ("flag".into(), String::new()),
                ("key".into(), "é".into()),
            ]
        );
        assert_eq!(pairs("").unwrap(), []);
        assert_eq!(one("key=plain").unwrap().1, "plain");
        assert_eq!(one("key=%e9%80%81").unwrap().1, "送");
    }

    /// `user%FF` and `user%FE` both read as `user\u{FFFD}`.
    #[test]
    fn escapes_that_decode_to_invalid_utf8_are_errors_not_replacement_characters() {
        for raw in ["key=user%FF", "key=user%FE", "key=%C3", "key=%ED%A0%80"] {
            let e = one(raw).unwrap_err();
            assert!(
                matches!(&e, QueryError::NotUtf8 { param, .. } if param == "key"),
                "{raw}: {e:?}"
            );
            assert!(e.to_string().starts_with("`key` is not UTF-8"), "{e}");
        }
        assert_eq!(
            one("key=ab%FF").unwrap_err(),
            QueryError::NotUtf8 {
                param: "key".into(),
                at: 2
            }
        );
    }

    #[test]
    fn bad_escapes_name_the_parameter_and_where() {
        for (raw, at) in [
            ("key=user%G1", 4),
            ("key=user%F", 4),
            ("key=user%", 4),
            ("key=%%41", 0),
            ("key=%1", 0),
        ] {
            assert_eq!(
                one(raw).unwrap_err(),
                QueryError::BadEscape {
                    param: "key".into(),
                    at
                },
                "{raw}"
            );
        }
        let e = one("n=%ZZ").unwrap_err();
        assert!(
            e.to_string().starts_with("`n` has a bad percent-escape"),
            "{e}"
        );
        // A bad name is quoted raw, at most 64 characters.
        let e = one("k%FFy=1").unwrap_err();
        assert_eq!(
            e,
            QueryError::NotUtf8 {
                param: "k%FFy".into(),
                at: 1
            }
        );
        let long = format!("{}%=1", "x".repeat(100));
        match one(&long).unwrap_err() {
            QueryError::BadEscape { param, at } => {
                assert_eq!((param.len(), at), (67, 100));
            }
            e => panic!("{e:?}"),
        }
    }
}
