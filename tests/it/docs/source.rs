//! The daemon's own source, for the tests that hold the docs to what the
//! code declares: every `.rs` file of src/ without its tests (files named
//! tests.rs are left out, and a file's text is cut at its `#[cfg(test)]`).

use std::path::{Path, PathBuf};

use crate::support::repo;

/// `(path, code without tests)` of every Rust file under src/.
pub fn code_outside_tests() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    files
        .into_iter()
        .filter(|f| !f.ends_with("tests.rs"))
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap().to_string();
            (f, code)
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
