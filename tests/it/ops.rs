//! Operations: `--version` and `rollstat_build_info` name the
//! build, `--log-format json` makes every stderr line one JSON object,
//! completions and the man page come out of the clap definitions.

use std::process::Command;
use std::time::Duration;

use crate::support::{repo, require_tool, run, wait_true, Daemon, TempDir, TEST_CONFIG};

const BIN: &str = env!("CARGO_BIN_EXE_rollstat");

/// Runs the binary with `args`; panics unless it succeeds.
fn rollstat(args: &[&str]) -> String {
    let out = run(Command::new(BIN).args(args), b"", Duration::from_secs(30));
    assert!(
        out.status.success(),
        "rollstat {args:?}: {}\n{}",
        out.status,
        out.stderr
    );
    out.stdout
}

/// The commit build.rs should have found: the packager's override, or
/// git's HEAD when the tests run in a git work tree.
fn expected_commit() -> String {
    if let Some(c) = option_env!("ROLLSTAT_BUILD_COMMIT").filter(|c| !c.trim().is_empty()) {
        return c.trim().to_string();
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["rev-parse", "--short=12", "HEAD"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_string(),
        _ => "unknown".to_string(),
    }
}

fn expected_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

#[test]
fn version_names_the_version_commit_and_profile() {
    let commit = expected_commit();
    let want = format!(
        "rollstat {} (commit {commit}, {} build)\n",
        env!("CARGO_PKG_VERSION"),
        expected_profile()
    );
    assert_eq!(rollstat(&["--version"]), want);
    assert_eq!(rollstat(&["-V"]), want);
}

#[test]
fn build_info_carries_version_commit_rustc_and_profile() {
    let d = Daemon::start();
    let s = d.scrape();
    let rustc = String::from_utf8(
        Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .arg("--version")
            .output()
            .expect("rustc --version")
            .stdout,
    )
    .unwrap();
    // "rustc 1.85.0 (...)": the same compiler builds the tests and the binary.
    let rustc = rustc.split_whitespace().nth(1).expect("a rustc version");
    assert_eq!(
        s.value(
            "rollstat_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", &expected_commit()),
                ("rustc", rustc),
                ("profile", expected_profile()),
            ]
        ),
        Some(1.0),
        "{}",
        d.get("/metrics", &[]).text()
    );
}

/// Every line of `--log-format json`, on stdout (the listening line) and
/// stderr, is one JSON object with a timestamp, a level, a target and
/// fields holding the message, through start, a bad statsd line, a good and
/// a bad SIGHUP reload and SIGTERM; `--log` still filters.
#[test]
fn json_logs_are_one_object_per_line_on_stdout_and_stderr_from_start_to_stop() {
    let mut d = Daemon::start_wrapped(
        TEST_CONFIG,
        &["sh", "-c", "exec \"$0\" \"$@\" --log-format json"],
    );
    d.send_udp(b"no colon here\n");
    wait_true(Duration::from_secs(10), "the bad line's warning", || {
        d.log().contains("Rejected a statsd line")
    });
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the good SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    // A bad file: the error spans several lines in text, one JSON line here.
    std::fs::write(&d.config, "this is not toml").unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the failed SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "error")]) == Some(1.0)
    });
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "exit status {st}; log:\n{}", d.log());

    // stdout: the listening line only, as a JSON object with every address.
    let stdout = d.stdout();
    assert_eq!(stdout.len(), 1, "{stdout:#?}");
    let ready: serde_json::Value = serde_json::from_str(&stdout[0])
        .unwrap_or_else(|e| panic!("the stdout line is not JSON ({e}): {:?}", stdout[0]));
    assert_eq!(ready["level"], "INFO", "{ready}");
    assert!(ready["timestamp"].is_string(), "{ready}");
    assert_eq!(ready["fields"]["message"], "rollstat listening", "{ready}");
    for (key, addr) in [
        ("statsd_udp", d.udp),
        ("statsd_tcp", d.tcp),
        ("http", d.http),
    ] {
        assert_eq!(ready["fields"][key], addr.to_string(), "{ready}");
    }

    let log = d.log();
    let mut events = Vec::new();
    for (i, line) in log.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stderr line {} is not JSON ({e}): {line:?}\n{log}", i + 1));
        for key in ["timestamp", "level", "target"] {
            assert!(v[key].is_string(), "line {}: no {key}: {line}", i + 1);
        }
        assert!(
            v["fields"]["message"].is_string(),
            "line {}: no fields.message: {line}",
            i + 1
        );
        events.push(v);
    }
    let find = |what: &str, f: &dyn Fn(&serde_json::Value) -> bool| {
        events
            .iter()
            .find(|v| f(v))
            .unwrap_or_else(|| panic!("no {what} in the log:\n{log}"))
            .clone()
    };
    let message = |v: &serde_json::Value| v["fields"]["message"].as_str().unwrap().to_string();
    let started = find("start line", &|v| message(v) == "rollstat started.");
    assert_eq!(started["level"], "INFO");
    assert!(started["fields"]["addresses"].is_string(), "{started}");
    let bad = find("bad line warning", &|v| {
        message(v).starts_with("Rejected a statsd line")
    });
    assert_eq!(bad["level"], "WARN");
    assert_eq!(bad["fields"]["transport"], "udp", "{bad}");
    assert_eq!(bad["fields"]["line"], "no colon here", "{bad}");
    let reloaded = find("good reload", &|v| {
        message(v).starts_with("Config reloaded")
    });
    assert_eq!(reloaded["level"], "INFO");
    assert!(reloaded["fields"]["kept"].is_number(), "{reloaded}");
    // The failed reload's message spans lines in text: one JSON string here.
    let failed = find("failed reload", &|v| {
        message(v).starts_with("Config reload failed")
    });
    assert_eq!(failed["level"], "ERROR");
    assert!(
        message(&failed).contains(&d.config.display().to_string()),
        "{failed}"
    );
    // Four events at least (start, bad line, two reloads, stop), and
    // `--log info` (the launcher's) keeps debug events out.
    assert!(events.len() >= 5, "{log}");
    assert!(events.iter().all(|v| v["level"] != "DEBUG"), "{log}");
}

#[test]
fn completions_come_out_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = rollstat(&["completions", shell]);
        assert!(
            out.contains("check-config") && out.contains("log-format"),
            "{shell} completions miss check-config or log-format:\n{out}"
        );
    }
    let bash = rollstat(&["completions", "bash"]);
    assert!(bash.contains("complete -F"), "{bash}");
    // An unknown shell is refused, naming the ones there are.
    let out = run(
        Command::new(BIN).args(["completions", "tcsh"]),
        b"",
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(out.stderr.contains("bash"), "{}", out.stderr);
}

#[test]
fn the_man_page_is_roff_that_man_renders() {
    let page = rollstat(&["man"]);
    assert!(
        page.starts_with(".TH") || page.starts_with(".ie"),
        "not roff:\n{page}"
    );
    assert!(page.contains(".TH rollstat 1"), "{page}");
    // roff escapes the dashes: `check\-config`.
    for word in ["check\\-config", "completions", "log\\-format"] {
        assert!(page.contains(word), "the man page misses {word}:\n{page}");
    }
    if which("man").is_none() {
        println!("note: `man` is not installed; the page was not rendered");
        return;
    }
    let man = require_tool("man");
    let dir = TempDir::new("rollstat-it-man");
    let file = dir.path().join("rollstat.1");
    std::fs::write(&file, &page).unwrap();
    let out = run(
        Command::new(man)
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80"),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "man -l: {}\n{}",
        out.status,
        out.stderr
    );
    assert!(
        out.stdout.contains("check-config"),
        "rendered:\n{}",
        out.stdout
    );
}

/// `name` on PATH, if there.
fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
