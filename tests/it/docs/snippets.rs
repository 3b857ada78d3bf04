//! The code in the docs runs.
//!
//! * Every ```` ```toml ```` block passes `rollstat check-config` on its own
//!   (a fragment is a whole config: everything it leaves out takes its
//!   default). A block that names files (certificates, users files,
//!   mapping files) is checked with those files missing: a problem that
//!   says "No such file or directory" is the only one allowed. A block
//!   marked `<!-- toml: invalid -->` must fail instead.
//! * Every ```` ```sh ```` block marked `<!-- runnable -->` runs, in order,
//!   with bash (`set -euo pipefail`) against a real daemon on the sample
//!   config, started for its page; the addresses `127.0.0.1:9102` and
//!   `/dev/udp/127.0.0.1/8125` are moved to that daemon's ports. A block
//!   fails when any of its commands does (a `grep` that finds nothing).
//! * README.md gives the test command `.ci/install-deps && cargo test`,
//!   and `.ci/run` runs it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::markdown::{blocks, pages, Block, Page};
use crate::support::{repo, require_tool, run, sample_config_on_port_0, Daemon, TempDir};

const MISSING_FILE: &str = "No such file or directory";

#[test]
fn toml_snippets_pass_check_config() {
    let dir = TempDir::new("docs-toml");
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for b in blocks(&page.text).into_iter().filter(|b| b.lang == "toml") {
            checked += 1;
            let invalid = b.marker.as_deref() == Some("toml: invalid");
            if let Err(e) = check_toml(dir.path(), &b, invalid) {
                bad.push(format!("{}:{}: {e}\n{}", page.rel, b.line, b.code));
            }
        }
    }
    assert!(
        checked >= 5,
        "only {checked} TOML snippets found: is the reader broken?"
    );
    assert!(
        bad.is_empty(),
        "{} TOML snippets fail:\n\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}

/// Runs `rollstat check-config` on the block; `Err` says why it does not
/// pass (or, for an `invalid` block, why it does).
fn check_toml(dir: &Path, b: &Block, invalid: bool) -> Result<(), String> {
    let file = dir.join("snippet.toml");
    std::fs::write(&file, &b.code).unwrap();
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&file)
            .current_dir(dir),
        b"",
        Duration::from_secs(30),
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    let problems: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains("snippet.toml: line "))
        .collect();
    let real: Vec<&&str> = problems
        .iter()
        .filter(|p| !p.contains(MISSING_FILE))
        .collect();
    let passes = out.status.success() || (!problems.is_empty() && real.is_empty());
    match (invalid, passes) {
        (false, true) | (true, false) => Ok(()),
        (false, false) => Err(format!("check-config refuses it:\n{all}")),
        (true, true) => Err("marked `toml: invalid`, but check-config takes it".into()),
    }
}

#[test]
fn runnable_shell_snippets_run() {
    // What the snippets use, besides bash (which runs them).
    require_tool("curl");
    require_tool("bash");
    let mut ran = 0;
    for page in pages() {
        let runnable: Vec<Block> = blocks(&page.text)
            .into_iter()
            .filter(|b| b.marker.as_deref() == Some("runnable"))
            .collect();
        if runnable.is_empty() {
            continue;
        }
        ran += runnable.len();
        run_page(&page, &runnable);
    }
    assert!(
        ran >= 5,
        "only {ran} runnable snippets found: is the reader broken?"
    );
}

/// Runs one page's runnable blocks, in order, against one fresh daemon.
fn run_page(page: &Page, runnable: &[Block]) {
    let d = Daemon::start_with(&sample_config_on_port_0());
    let dir = TempDir::new("docs-sh");
    for b in runnable {
        assert_eq!(
            b.lang, "sh",
            "{}:{}: a runnable block must be ```sh",
            page.rel, b.line
        );
        let script = format!("set -euo pipefail\n{}", moved(&b.code, &d));
        let out = run(
            Command::new("bash")
                .arg("-c")
                .arg(&script)
                .current_dir(dir.path()),
            b"",
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{}:{}: the runnable snippet failed ({}):\n{}\n--- stdout\n{}\n--- stderr\n{}\n--- daemon log\n{}",
            page.rel,
            b.line,
            out.status,
            b.code,
            out.stdout,
            out.stderr,
            d.log()
        );
    }
}

/// The snippet with the sample config's addresses moved to `d`'s ports.
fn moved(code: &str, d: &Daemon) -> String {
    code.replace(
        "/dev/udp/127.0.0.1/8125",
        &format!("/dev/udp/127.0.0.1/{}", d.udp.port()),
    )
    .replace(
        "/dev/tcp/127.0.0.1/8125",
        &format!("/dev/tcp/127.0.0.1/{}", d.tcp.port()),
    )
    .replace("127.0.0.1:9102", &d.http.to_string())
}

/// The README's test command is what CI runs.
#[test]
fn readme_test_command_is_what_ci_runs() {
    const COMMAND: &str = ".ci/install-deps && cargo test";
    let readme = Page::read("README.md");
    assert!(
        blocks(&readme.text)
            .iter()
            .any(|b| b.lang == "sh" && b.code.trim() == COMMAND),
        "README.md must give the test command `{COMMAND}` in a ```sh block of its own"
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect("read .ci/run");
    assert!(
        ci.lines().any(|l| l.trim().starts_with(COMMAND)),
        ".ci/run must run the README's test command `{COMMAND}`"
    );
}
