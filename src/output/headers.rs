//! `headers_file`: extra headers sent with each request of an output, one
//! `Name: value` per line (blank lines and `#` comments skipped), for
//! receivers that want a tenant (`X-Scope-OrgID`) or a vendor's key.

use std::path::Path;

use hyper::header::{HeaderName, HeaderValue};

/// Headers rollstat sets itself, which a file may not replace.
const OWN: &[&str] = &[
    "content-type",
    "content-encoding",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "user-agent",
    "x-prometheus-remote-write-version",
];

/// The headers in the file at `path`, or what is wrong with it (which
/// line, and why), for the operator.
pub fn read(path: &Path) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let text = crate::file::read_text(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The headers `text` holds.
pub fn parse(text: &str) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("line {n}: expected `Name: value`"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("line {n}: `{}` is not a header name", name.trim()))?;
        if OWN.contains(&name.as_str()) {
            return Err(format!(
                "line {n}: {name} is set by rollstat itself and cannot be replaced"
            ));
        }
        let value = HeaderValue::from_str(value.trim()).map_err(|_| {
            format!("line {n}: the value of {name} holds a character a header cannot carry")
        })?;
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_headers_and_mistakes_name_their_line() {
        let h = parse("# tenant\nX-Scope-OrgID: team-a\n\nX-Extra:  b c \n").unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].0, "x-scope-orgid");
        assert_eq!(h[1].1, "b c");
        assert_eq!(
            parse("ok: 1\nnot a header").unwrap_err(),
            "line 2: expected `Name: value`"
        );
        assert!(parse("Content-Encoding: gzip")
            .unwrap_err()
            .contains("set by rollstat"));
        assert!(parse("bad name: x")
            .unwrap_err()
            .contains("not a header name"));
    }
}
