//! Series bounds seen from outside: the series cap, type conflicts and
//! expiry after the TTL, each counted.

use std::time::Duration;

use crate::support::{Daemon, TEST_CONFIG};

fn with_series(settings: &str) -> String {
    let cfg = TEST_CONFIG.replace(
        "quantiles = [0.5, 0.99]",
        &format!("quantiles = [0.5, 0.99]\n{settings}"),
    );
    assert_ne!(cfg, TEST_CONFIG);
    cfg
}

#[test]
fn lines_beyond_the_series_cap_are_refused_and_existing_series_keep_counting() {
    let d = Daemon::start_with(&with_series("max_series = 3"));
    // Lines of different names may be applied in any order (they go to
    // ingest workers by name): fill the cap first, then overflow it.
    d.send_udp(b"cap.a:1|c\ncap.b:1|c\ncap.c:1|c");
    d.wait_lines("udp", 3.0, Duration::from_secs(10));
    d.send_udp(b"cap.d:1|c\ncap.e:1|c|#k:v\ncap.a:1|c");
    let s = d.wait_scrape(
        Duration::from_secs(10),
        "every line applied or refused",
        |s| {
            s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(4.0)
                && s.value("rollstat_series_refused_total", &[("reason", "series_cap")])
                    == Some(2.0)
        },
    );
    assert_eq!(
        s.must("rollstat_series_refused_total", &[("reason", "series_cap")]),
        2.0
    );
    assert_eq!(s.must("rollstat_series", &[]), 3.0);
    assert_eq!(s.must("cap_a_total", &[]), 2.0);
    assert_eq!(s.value("cap_d_total", &[]), None);
    assert_eq!(
        s.must("rollstat_ingest_lines_total", &[("transport", "udp")]),
        4.0
    );
}

#[test]
fn a_name_reused_with_another_type_is_refused_as_a_type_conflict() {
    let d = Daemon::start();
    d.send_udp(b"tc:1|c\ntc:2|g\ntc:3|ms\ntc:4|c");
    let s = d.wait_lines("udp", 2.0, Duration::from_secs(10));
    assert_eq!(
        s.must(
            "rollstat_series_refused_total",
            &[("reason", "type_conflict")]
        ),
        2.0
    );
    assert_eq!(s.must("tc_total", &[]), 5.0);
    assert_eq!(s.value("tc", &[]), None);
    assert_eq!(s.value("tc_count", &[]), None);
}

#[test]
fn an_idle_series_expires_after_its_ttl_and_comes_back_fresh() {
    // A TTL of 1 s needs windows no longer than that (check-config refuses
    // a TTL shorter than a window).
    let cfg = with_series("ttl_secs = 1");
    let windows = cfg
        .find("[[windows]]")
        .expect("TEST_CONFIG ends with its windows");
    let cfg = format!(
        "{}[[windows]]\nname = \"1s\"\nbuckets = 1\ninterval_ms = 1000\n",
        &cfg[..windows]
    );
    let d = Daemon::start_with(&cfg);
    d.send_udp(b"idle.a:5|c");
    d.wait_lines("udp", 1.0, Duration::from_secs(10));
    // TTL 1 s; the sweeper runs every 250 ms.
    let s = d.wait_scrape(Duration::from_secs(5), "the series to expire", |s| {
        s.value("rollstat_series_expired_total", &[]) == Some(1.0)
    });
    assert_eq!(s.value("idle_a_total", &[]), None);
    assert_eq!(s.must("rollstat_series", &[]), 0.0);
    d.send_udp(b"idle.a:1|c");
    let s = d.wait_lines("udp", 2.0, Duration::from_secs(10));
    assert_eq!(s.must("idle_a_total", &[]), 1.0);
    assert_eq!(s.must("rollstat_series_created_total", &[]), 2.0);
}
