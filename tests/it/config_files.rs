//! The files a config names, as a careless operator or a hostile one may
//! leave them: nested thousands of levels deep, an alias bomb of a few
//! hundred bytes, a FIFO, a file of many megabytes. Each is refused with the
//! file, its line and the cap, and counted under its reason; a refusal at
//! reload keeps the old config, and nothing in a file crashes, hangs or
//! exhausts the daemon or `check-config`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{run, wait_true, Daemon, Output, TempDir, TEST_CONFIG};

fn rollstat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollstat"))
}

/// `rollstat check-config FILE`, within 30 s.
fn check_config(file: &Path) -> Output {
    run(
        rollstat().arg("check-config").arg(file),
        b"",
        Duration::from_secs(30),
    )
}

const MAPPING: &str =
    "mappings:\n- match: app.*.requests\n  name: app_requests_total\n  labels:\n    route: $1\n";

/// `mappings:` over `levels` nested lists (`- - - ... x`).
fn nested(levels: usize) -> String {
    format!("mappings:\n  {}x\n", "- ".repeat(levels))
}

/// `a0` a list of ten strings, then each `a{i}` a mapping whose one key is
/// a list of ten aliases of `a{i-1}`: 10^levels strings once expanded, in
/// about 65 bytes a level.
fn key_bomb(levels: usize) -> String {
    let mut s = format!("a0: &a0 [{}]\n", ["\"x\""; 10].join(","));
    for i in 1..=levels {
        let prev = format!("*a{}", i - 1);
        s += &format!("a{i}: &a{i} {{ ? [{}] : 1 }}\n", vec![prev; 10].join(","));
    }
    s
}

/// A daemon on the test config whose mapping file is `file` (holding
/// [`MAPPING`]), with one mapped line applied.
fn daemon_with_mapping(file: &Path) -> Daemon {
    std::fs::write(file, MAPPING).unwrap();
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
        file.display()
    ));
    d.send_udp(b"app.login.requests:1|c");
    d.wait_lines("udp", 1.0, Duration::from_secs(10));
    d
}

fn requests(d: &Daemon) -> Option<f64> {
    d.scrape()
        .value("app_requests_total", &[("route", "login")])
}

fn refusals(d: &Daemon, reason: &str) -> Option<f64> {
    d.scrape().value(
        "rollstat_config_reload_refusals_total",
        &[("reason", reason)],
    )
}

/// SIGHUP, then waits until a reload refused under `reason` is counted;
/// the daemon must still serve, with the old rules.
fn reload_is_refused(d: &mut Daemon, reason: &str) {
    d.signal("HUP");
    wait_true(Duration::from_secs(20), "the reload refusal", || {
        refusals(d, reason) == Some(1.0)
    });
    assert!(d.alive(), "the daemon survives the file: {}", d.log());
    assert_eq!(
        d.scrape().value("rollstat_config_last_reload_success", &[]),
        Some(0.0)
    );
    // The old rules are in force.
    d.send_udp(b"app.login.requests:1|c");
    d.wait_lines("udp", 2.0, Duration::from_secs(10));
    assert_eq!(requests(d), Some(2.0), "{}", d.log());
}

fn vm_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn a_mapping_file_nested_thousands_deep_is_refused_at_reload_and_the_old_rules_stay() {
    let dir = TempDir::new("cf-deep");
    let file = dir.path().join("mapping.yml");
    let mut d = daemon_with_mapping(&file);
    assert_eq!(requests(&d), Some(1.0));
    std::fs::write(&file, nested(5_000)).unwrap();
    reload_is_refused(&mut d, "too_deep");
    let log = d.log();
    assert!(
        log.contains("mapping.yml:2: `(file)`: lists and mappings nest deeper than 64 levels"),
        "{log}"
    );
}

#[test]
fn check_config_and_a_start_refuse_twenty_thousand_levels_with_the_line() {
    let dir = TempDir::new("cf-deep-start");
    let map = dir.path().join("mapping.yml");
    std::fs::write(&map, nested(20_000)).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!("basic_auth_users:\n  {}x\n", "- ".repeat(20_000)),
    )
    .unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "{TEST_CONFIG}\n[statsd_exporter]\nmapping_file = \"{}\"\n",
            map.display()
        )
        .replace(
            "[http.auth.admin]",
            &format!(
                "[http]\nweb_config_file = \"{}\"\n\n[http.auth.admin]",
                web.display()
            ),
        ),
    )
    .unwrap();
    let out = check_config(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    for want in [
        format!(
            "{}:2: `(file)`: lists and mappings nest deeper than 64 levels",
            map.display()
        ),
        format!(
            "{}:2: `(file)`: lists and mappings nest deeper than 64 levels",
            web.display()
        ),
    ] {
        assert!(out.stderr.contains(&want), "{want} in\n{}", out.stderr);
    }
    // The daemon refuses to start, with an exit status, not a signal.
    let out = run(
        rollstat().arg("--config").arg(&cfg),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "{:?}: {}",
        out.status,
        out.stderr
    );
    assert!(
        out.stderr.contains("nest deeper than 64 levels"),
        "{}",
        out.stderr
    );
}

#[test]
fn config_toml_nested_thousands_deep_is_refused_with_its_line() {
    let dir = TempDir::new("cf-deep-toml");
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "{TEST_CONFIG}\n[x]\ny = {}{}\n",
            "[".repeat(20_000),
            "]".repeat(20_000)
        ),
    )
    .unwrap();
    let out = check_config(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("nest too deeply"), "{}", out.stderr);
}

#[test]
fn an_alias_bomb_through_mapping_keys_is_refused_at_once_and_costs_no_memory() {
    let dir = TempDir::new("cf-bomb");
    let bomb = dir.path().join("bomb.yml");
    std::fs::write(&bomb, key_bomb(7)).unwrap();
    let size = std::fs::metadata(&bomb).unwrap().len();
    assert!(size < 600, "{size} bytes");
    // convert-mapping: refused (it ran out of memory after 36 s before).
    let out = run(
        rollstat().arg("convert-mapping").arg(&bomb),
        b"",
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("aliases (`*name`) expand to more than 100000 nodes"),
        "{}",
        out.stderr
    );
    // And at a reload: refused, counted, the memory it had kept.
    let file = dir.path().join("mapping.yml");
    let mut d = daemon_with_mapping(&file);
    let before = vm_rss_bytes(d.pid());
    std::fs::write(&file, key_bomb(7)).unwrap();
    reload_is_refused(&mut d, "alias_budget");
    let after = vm_rss_bytes(d.pid());
    assert!(
        after < before + 64 * 1024 * 1024,
        "RSS {before} -> {after} bytes"
    );
}

#[test]
fn a_fifo_as_mapping_file_is_refused_and_a_stop_is_not_held() {
    let dir = TempDir::new("cf-fifo");
    let file = dir.path().join("mapping.yml");
    let mut d = daemon_with_mapping(&file);
    std::fs::remove_file(&file).unwrap();
    let st = Command::new("mkfifo").arg(&file).status().expect("mkfifo");
    assert!(st.success());
    reload_is_refused(&mut d, "not_regular");
    assert!(
        d.log()
            .contains("it is a FIFO (named pipe), not a regular file"),
        "{}",
        d.log()
    );
    // Nobody ever writes to the FIFO: the stop still ends the process.
    d.signal("TERM");
    let st = d.wait_exit(Duration::from_secs(15));
    assert!(st.success(), "{st}: {}", d.log());
}

#[test]
fn files_above_the_cap_are_refused_by_check_config() {
    let dir = TempDir::new("cf-big");
    let map = dir.path().join("mapping.yml");
    // Sparse: 16 MiB + 1 byte of zeros, no disk.
    let f = std::fs::File::create(&map).unwrap();
    f.set_len(16 * 1024 * 1024 + 1).unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!("[statsd_exporter]\nmapping_file = \"{}\"\n", map.display()),
    )
    .unwrap();
    let out = check_config(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("it is 16777217 bytes or more, above the cap of 16777216 bytes"),
        "{}",
        out.stderr
    );
    // config.toml itself too.
    let f = std::fs::File::create(&cfg).unwrap();
    f.set_len(16 * 1024 * 1024 + 1).unwrap();
    let out = check_config(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("above the cap"), "{}", out.stderr);
}
