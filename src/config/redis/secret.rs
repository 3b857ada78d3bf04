//! The Redis password: a [`Secret`] that never prints, read from a file or
//! an environment variable so that it need not sit in config.toml.

use crate::store::Secret;
use std::path::Path;

/// The first line of the file at `path` (its line end, `\n` or `\r\n`,
/// left out). The error says what to do and never quotes the file.
pub(super) fn from_file(path: &Path) -> Result<Secret, String> {
    let bytes = crate::file::read_bytes(path).map_err(|e| {
        if path.components().count() > 1 {
            format!("cannot read `{}`: {e}", path.display())
        } else {
            // Not quoted: a bare word may be the password, written here by
            // mistake.
            format!("cannot read the file: {e}; give the path of a file that holds the password (e.g. \"/run/secrets/redis\"), not the password")
        }
    })?;
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = std::str::from_utf8(line)
        .map_err(|_| format!("the first line of `{}` is not UTF-8", path.display()))?;
    if text.is_empty() {
        return Err(format!(
            "the first line of `{}` is empty; write the password on it",
            path.display()
        ));
    }
    Ok(Secret::new(text))
}

/// The value of the environment variable `name`. The error never quotes the
/// value.
pub(super) fn from_env(name: &str) -> Result<Secret, String> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        // Not quoted: it may be the password, written here by mistake.
        return Err("is not an environment variable name (letters, digits and '_', not starting with a digit); give the variable's name (e.g. \"REDIS_PASSWORD\"), not the password".into());
    }
    // Quoted only when it looks like a variable's name (upper case): a
    // lower-case word may be the password, written here by mistake.
    let shown = if name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        format!("`{name}`")
    } else {
        "named here".to_string()
    };
    match std::env::var(name) {
        Ok(v) if v.is_empty() => Err(format!(
            "the environment variable {shown} is empty; set it to the password"
        )),
        Ok(v) => Ok(Secret::new(v)),
        Err(std::env::VarError::NotPresent) => Err(format!(
            "the environment variable {shown} is not set; set it to the password in the daemon's environment (or give the variable's name here, not the password)"
        )),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "the environment variable {shown} is not UTF-8"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_gives_its_first_line() {
        let dir = std::env::temp_dir().join(format!("rollstat-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, (text, want)) in [
            (&b"pa55\n"[..], Ok("pa55")),
            (b"pa55", Ok("pa55")),
            (b"pa55\r\nsecond line\n", Ok("pa55")),
            (b"  spaced pass  \n", Ok("  spaced pass  ")),
            (b"\nlater\n", Err("is empty")),
            (b"", Err("is empty")),
            (b"\xff\xfe\n", Err("not UTF-8")),
        ]
        .into_iter()
        .enumerate()
        {
            let path = dir.join(format!("p{i}"));
            std::fs::write(&path, text).unwrap();
            match (from_file(&path), want) {
                (Ok(s), Ok(w)) => assert_eq!(s.expose(), w),
                (Err(e), Err(w)) => {
                    assert!(e.contains(w), "{e}");
                    assert!(e.contains(&path.display().to_string()), "{e}");
                }
                (got, want) => panic!("{text:?}: {got:?} vs {want:?}"),
            }
        }
        let e = from_file(&dir.join("missing")).unwrap_err();
        assert!(e.contains("cannot read") && e.contains("missing"), "{e}");
        // A bare word may be the password itself: not quoted.
        let e = from_file(Path::new("hunter2")).unwrap_err();
        assert!(
            e.contains("not the password") && !e.contains("hunter2"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_password_variable_is_read_by_name() {
        // Names only this test uses: tests run on threads of one process.
        let name = "ROLLSTAT_TEST_SECRET_ENV_A1";
        std::env::set_var(name, "from-env");
        assert_eq!(from_env(name).unwrap().expose(), "from-env");
        std::env::set_var("ROLLSTAT_TEST_SECRET_ENV_EMPTY", "");
        assert!(from_env("ROLLSTAT_TEST_SECRET_ENV_EMPTY")
            .unwrap_err()
            .contains("is empty"));
        let e = from_env("ROLLSTAT_TEST_SECRET_ENV_UNSET").unwrap_err();
        assert!(e.contains("is not set"), "{e}");
        let e = from_env("pa55word").unwrap_err();
        assert!(
            e.contains("named here is not set") && !e.contains("pa55word"),
            "{e}"
        );
        for bad in ["", "1ABC", "MY-VAR", "pa55 word"] {
            let e = from_env(bad).unwrap_err();
            assert!(e.contains("not an environment variable name"), "{bad}: {e}");
            assert!(bad.is_empty() || !e.contains(bad), "{bad}: {e}");
        }
    }
}
