//! What a SIGHUP keeps when it edits a
//! limit or a breaker, through the real binary. Windows are 60 s long, so
//! the tests never race the clock (the daemon runs real time).
//!
//! * A limit raised from 50 to 60 per minute, with 50 admitted: 10 more in
//!   the same minute, not 30 (the old code started every key afresh).
//! * An open error-rate breaker whose `failure_rate_threshold` is edited
//!   stays open with its counts (the old code built a fresh closed one).
//! * The same limit shared through Redis: the fleet's history is kept (the
//!   old Redis keys named `max`, so a new `max` started an empty history).
//! * A SIGHUP and a `POST /-/reload` at once, the file flipping between two
//!   while they read: after both, the limit (services) and the windows (the
//!   plan) come from the same file (the old code took the config lock only
//!   after swapping the services, and mixed them in 2 to 6 rounds of 800).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::exactness::Http;
use crate::support::{wait_true, Daemon, Scrape};

const LIMIT: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[limits]]
name = "api"
algorithm = "exact"
rules = [{ max = 50, window_ms = 60000 }]
"#;

/// Sends a SIGHUP and waits for the `n`th good reload.
fn sighup(d: &Daemon, n: f64) {
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(n)
    });
}

/// How many of `offered` acquires for `key` are admitted (200; else 429).
fn admitted(c: &mut Http, key: &str, offered: usize) -> usize {
    let path = format!("/api/v1/limits/api/acquire?key={key}");
    (0..offered)
        .filter(|_| {
            let (code, _, body) = c.call("POST", &path, "");
            assert!(code == 200 || code == 429, "{code}: {body}");
            code == 200
        })
        .count()
}

#[test]
fn a_limit_raised_from_50_to_60_per_minute_at_a_sighup_admits_10_more_not_30() {
    let d = Daemon::start_with(LIMIT);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 50), 50);
    assert_eq!(admitted(&mut c, "alice", 1), 0);
    std::fs::write(&d.config, LIMIT.replace("max = 50", "max = 60")).unwrap();
    sighup(&d, 1.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 30), 10);
    // A key never seen has the whole new limit.
    assert_eq!(admitted(&mut c, "bob", 61), 60);
    // The decision counts went on over the reload: 50 + 10 + 60 allowed,
    // 1 + 20 + 1 denied.
    let s = d.scrape();
    let decisions = |d: &str| {
        s.must(
            "rollstat_limit_decisions_total",
            &[("limit", "api"), ("decision", d)],
        )
    };
    assert_eq!((decisions("allowed"), decisions("denied")), (120.0, 22.0));
    // Lowered to 40: alice holds 60, bob 60: both denied.
    std::fs::write(&d.config, LIMIT.replace("max = 50", "max = 40")).unwrap();
    sighup(&d, 2.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 5), 0);
    assert_eq!(admitted(&mut c, "bob", 5), 0);
}

const BREAKER: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[[breakers]]
name = "pay"
kind = "error_rate"
requests_metric = "pay.requests"
failures_metric = "pay.failures"
window_ms = 60000
buckets = 10
min_calls = 10
failure_rate_threshold = 0.5
open_duration_ms = 60000
half_open_trials = 3
"#;

#[test]
fn an_open_breaker_stays_open_with_its_counts_when_its_threshold_is_edited_at_a_sighup() {
    let d = Daemon::start_with(BREAKER);
    let state = "rollstat_breaker_state{breaker=\"pay\"";
    d.send_udp(b"pay.requests:20|c\npay.failures:12|c\n");
    wait_true(Duration::from_secs(10), "the breaker to open", || {
        d.metric(state) == Some(1.0)
    });
    let counts = |d: &Daemon| {
        (
            d.metric("rollstat_breaker_requests{breaker=\"pay\""),
            d.metric("rollstat_breaker_failures{breaker=\"pay\""),
        )
    };
    let before = counts(&d);
    assert!(before.1.is_some_and(|f| f > 0.0), "{before:?}");
    std::fs::write(
        &d.config,
        BREAKER.replace(
            "failure_rate_threshold = 0.5",
            "failure_rate_threshold = 0.9",
        ),
    )
    .unwrap();
    sighup(&d, 1.0);
    assert_eq!(
        d.metric(state),
        Some(1.0),
        "the breaker closed at the reload"
    );
    assert_eq!(counts(&d), before);
    let decision = d
        .post("/api/v1/breakers/pay/decision", "application/json", b"")
        .text();
    assert!(decision.contains("\"decision\":\"shed\""), "{decision}");
}

#[test]
fn a_shared_limit_raised_at_a_sighup_keeps_the_fleet_history_in_redis() {
    let Some(redis) = crate::redis_server::Redis::start() else {
        return;
    };
    let shared = format!(
        "{}shared = true\non_store_error = \"deny\"\n\n[redis]\n{}\n",
        LIMIT,
        redis.section()
    );
    let d = Daemon::start_with(&shared);
    let mut c = Http::connect(d.http);
    let (code, _, body) = c.call("POST", "/api/v1/limits/api/acquire?key=alice", "");
    assert!(
        code == 200 && body.contains("\"source\":\"redis\""),
        "{code}: {body}"
    );
    assert_eq!(admitted(&mut c, "alice", 49), 49);
    assert_eq!(admitted(&mut c, "alice", 1), 0);
    std::fs::write(&d.config, shared.replace("max = 50", "max = 60")).unwrap();
    sighup(&d, 1.0);
    let mut c = Http::connect(d.http);
    assert_eq!(admitted(&mut c, "alice", 30), 10);
    // The Redis key names the window only.
    let exists = redis.command("EXISTS rollstat:{api:alice}:60s");
    assert_eq!(exists.as_deref().map(str::trim), Some(":1"));
}

/// File `which` (0 or 1) of the race test: limit `race` admits `which + 1`
/// per minute (read into the services) and the one window is `w<which>`
/// (read into the plan).
fn race_file(which: usize) -> String {
    format!(
        r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = ""
http = "127.0.0.1:0"

[http.auth.admin]
access = "open"

[[windows]]
name = "w{which}"
buckets = 6
interval_ms = 10000

[[limits]]
name = "race"
rules = [{{ max = {max}, window_ms = 60000 }}]
"#,
        max = which + 1
    )
}

/// Writes `text` to `path` whole: a temporary file renamed into place, so
/// every read of `path` sees one file or the other.
fn write_whole(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("next");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Which file (0 or 1) the limit `race` in force comes from, by its max.
fn services_file(d: &Daemon) -> usize {
    let r = d.get("/api/v1/limits", &[]);
    assert_eq!(r.status, 200, "GET /api/v1/limits: {}", r.text());
    let j = r.json();
    let limit = j
        .as_array()
        .and_then(|a| a.iter().find(|l| l["name"] == "race"))
        .unwrap_or_else(|| panic!("no limit `race` in {j}"));
    match limit["rules"][0]["max"].as_u64() {
        Some(1) => 0,
        Some(2) => 1,
        _ => panic!("the limit is not one file's: {limit}"),
    }
}

/// Which file (0 or 1) the windows of the series in force come from.
fn plan_file(d: &Daemon) -> usize {
    let r = d.get("/api/v1/metrics", &[]);
    assert_eq!(r.status, 200, "GET /api/v1/metrics: {}", r.text());
    let j = r.json();
    match j["windows"].as_array().map(Vec::as_slice) {
        Some([w]) if w == "w0" => 0,
        Some([w]) if w == "w1" => 1,
        _ => panic!("the series' windows are not one file's: {j}"),
    }
}

/// The good reloads so far.
fn good_reloads(s: &Scrape) -> f64 {
    s.value("rollstat_config_reloads_total", &[("result", "ok")])
        .unwrap_or(0.0)
}

#[test]
fn a_sighup_and_a_post_reload_at_once_never_mix_two_files() {
    const ROUNDS: usize = 800;
    let d = Daemon::start_with(&race_file(0));
    // File 0 also turns HTTPS on, which a reload only warns about (a log
    // line, written between the old code's services swap and its config
    // lock): that wider window is what lets the old code mix the two files,
    // in 2 to 6 rounds of 800 measured. The certificate files need only be
    // readable.
    let pem = d.config.with_file_name("unused.pem");
    std::fs::write(&pem, "unused").unwrap();
    let files = [
        format!(
            "{}\n[http.tls]\ncert_file = \"{p}\"\nkey_file = \"{p}\"\n",
            race_file(0),
            p = pem.display()
        ),
        race_file(1),
    ];
    // One series, re-planned onto the windows of each reload.
    d.send_udp(b"race.c:1|c\n");
    d.wait_lines("udp", 1.0, Duration::from_secs(10));
    assert_eq!((services_file(&d), plan_file(&d)), (0, 0));
    let started = Instant::now();
    let mut reloads = good_reloads(&d.scrape());
    let (mut rounds, mut mixed, mut finals) = (0, Vec::new(), [0; 2]);
    while rounds < ROUNDS && started.elapsed() < Duration::from_secs(40) {
        let barrier = Barrier::new(3);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                d.signal("HUP");
            });
            s.spawn(|| {
                barrier.wait();
                // `kill` takes about a millisecond to send the SIGHUP: the
                // POST starts 0 to 3 ms later, a different delay each round,
                // so that some rounds apply the two reloads within
                // microseconds of each other.
                std::thread::sleep(Duration::from_micros((rounds as u64 * 7919) % 3000));
                let r = d.post("/-/reload", "text/plain", b"");
                assert_eq!(r.status, 200, "POST /-/reload: {}", r.text());
            });
            // The file flips between the two while the reloads read: each
            // may read either.
            s.spawn(|| {
                barrier.wait();
                let mut i = rounds;
                while !done.load(Ordering::Relaxed) {
                    i += 1;
                    write_whole(&d.config, &files[i % 2]);
                    // Thousands of flips per reload still, without taking
                    // a core from the daemon on a busy machine.
                    std::thread::sleep(Duration::from_micros(50));
                }
            });
            // The writer stops however this round ends: a failed wait
            // fails the test instead of leaving the scope waiting on it.
            let _stop_writer = SetOnDrop(&done);
            // SIGHUP reloads asynchronously: wait for both reloads.
            reloads += 2.0;
            d.wait_scrape(Duration::from_secs(10), "both reloads", |s| {
                good_reloads(s) == reloads
            });
        });
        let got = (services_file(&d), plan_file(&d));
        finals[got.0] += 1;
        if got.0 != got.1 {
            mixed.push((rounds, got));
        }
        rounds += 1;
    }
    eprintln!(
        "{rounds} rounds in {:.1} s; the services of file 0 after {} and of file 1 after {}; mixed after {}",
        started.elapsed().as_secs_f64(),
        finals[0],
        finals[1],
        mixed.len()
    );
    assert!(
        mixed.is_empty(),
        "(round, (the services' file, the plan's file)) after both reloads: {mixed:?} of {rounds} rounds"
    );
}

/// Sets its flag when dropped (at the end of a scope, or while a panic
/// unwinds it).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
