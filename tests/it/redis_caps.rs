//! The cost of shared windows is bounded. Series of a shared
//! rule beyond `redis.max_shared_series`, or whose name and labels exceed
//! `redis.max_shared_label_bytes`, stay local, counted by
//! `rollstat_fleet_unshared_series{reason}`.

use std::net::UdpSocket;
use std::time::Duration;

use crate::redis::config;
use crate::redis_server::Redis;
use crate::support::Daemon;

#[test]
fn series_beyond_the_caps_stay_local_and_are_counted() {
    let Some(redis) = Redis::start() else { return };
    let cfg = config(
        &format!(
            "{}\nsync_interval_ms = 100\nmax_shared_series = 3\nmax_shared_label_bytes = 64",
            redis.section()
        ),
        r#"
[[windows]]
name = "w"
buckets = 30
interval_ms = 1000

[[mappings]]
match = "capped.*"
shared = true
"#,
    );
    let d = Daemon::start_with(&cfg);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let long = "x".repeat(100);
    let mut lines: Vec<String> = (0..5).map(|i| format!("capped.s{i}:1|c")).collect();
    lines.push(format!("capped.tagged:1|c|#team:{long}"));
    s.send_to(lines.join("\n").as_bytes(), d.udp).unwrap();
    let scrape = d.wait_scrape(Duration::from_secs(10), "the caps to apply", |s| {
        s.value("rollstat_fleet_unshared_series", &[("reason", "cap")]) == Some(2.0)
            && s.value("rollstat_fleet_unshared_series", &[("reason", "labels")]) == Some(1.0)
            && s.by_label("rollstat_fleet_window_samples", "metric").len() == 3
    });
    // The three shared series show their fleet view; the others only their
    // local windows.
    let fleet = scrape.by_label("rollstat_fleet_window_samples", "metric");
    assert!(fleet.values().all(|v| *v == 1.0), "{fleet:?}");
    assert!(!fleet.contains_key("capped.tagged"), "{fleet:?}");
    let local = scrape.by_label("rollstat_window_samples", "metric");
    assert_eq!(local.len(), 6, "{local:?}");
    let keys = redis.cli_command(&["--raw", "KEYS", "rollstat:win:*"]);
    assert_eq!(keys.lines().count(), 3, "{keys}");
    println!(
        "shared {:?}; 2 kept local by the cap, 1 by its labels",
        fleet.keys()
    );
}
