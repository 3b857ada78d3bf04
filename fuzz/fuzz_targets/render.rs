//! render: the whole `/metrics` body (self-metrics, breakers, limits and
//! every series of the shipped config.toml) in both formats, after
//! arbitrary datagrams, each read back by the tests' exposition parser as
//! Prometheus reads it: it parses, no two samples are one series, and no
//! counter goes down between two scrapes of live series.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollstat::clock::Clock;
use rollstat::ingest::Worker;
use rollstat::telemetry::Transport;
use rollstat_fuzz::{arrivals, scrape, shipped_state};
use rollstat_testkit::scrape::Scrape;

fn check(body: &str, openmetrics: bool) -> Scrape {
    let s =
        Scrape::try_parse(body).unwrap_or_else(|e| panic!("unreadable exposition ({e}):\n{body}"));
    let dups = s.duplicates();
    assert!(dups.is_empty(), "series repeated: {dups:?}\n{body}");
    if openmetrics {
        assert!(body.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
        assert_eq!(body.matches("# EOF").count(), 1, "one # EOF");
    } else {
        assert!(!body.contains("# EOF"));
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let (state, clock) = shipped_state();
    let arrivals = arrivals(data);
    let half = arrivals.len() / 2;
    let mut w = Worker::default();
    let mut first = None;
    for (i, a) in arrivals.iter().enumerate() {
        if i == half {
            state.ingestor.flush(Transport::Udp, &mut w);
            first = Some(check(&scrape(&state, false), false));
            check(&scrape(&state, true), true);
        }
        clock.advance(a.after);
        state.ingestor.ingest(a.bytes, clock.now(), &mut w);
    }
    state.ingestor.flush(Transport::Udp, &mut w);
    let last = check(&scrape(&state, false), false);
    check(&scrape(&state, true), true);
    // At most 255 arrivals of 2.55 s: far inside the series TTL, so every
    // series of the first scrape is still live.
    if let Some(first) = first {
        let down = last.decreased_since(&first);
        assert!(down.is_empty(), "counters went down: {down:?}");
    }
});
