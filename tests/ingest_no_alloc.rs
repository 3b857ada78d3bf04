//! The whole ingest path (parse, key, registry lookup, window and cumulative
//! updates, breaker feeds, counts) allocates nothing per line once a series
//! exists, and routing lines to the ingest workers allocates nothing once
//! their buffers are warm. Its own test binary, because it installs a
//! counting allocator.

use std::sync::Arc;

use rollstat::config::Config;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::parse::{ParseOptions, TagStyles};
use rollstat::series::{Plan, Registry};
use rollstat::service::{ServiceHandle, Services};
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, ManualClock};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

#[test]
fn ingesting_into_existing_series_allocates_nothing_per_line() {
    let breaker = r#"
[[breakers]]
name = "b"
kind = "sre"
requests_metric = "api.requests"
failures_metric = "api.failures"
"#;
    let cfg = Config::parse(&[include_str!("common/two_windows.toml"), breaker].concat()).unwrap();
    let clock = ManualClock::new();
    let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), 16));
    let services = Arc::new(ServiceHandle::new(
        Services::new(cfg.service_settings(), clock.now(), None).unwrap(),
    ));
    let telemetry = Arc::new(Telemetry::new().unwrap());
    let ing = Ingestor::new(registry, telemetry, Arc::new(clock.clone()), services);
    let dgram = b"api.requests:1|c|#route:/x,code:200\napi.failures:1|c\n\
        api.latency:12.5|ms|@0.5|#route:/x\nqueue.depth:+3|g\nusers:alice|s\n\
        db.rows:1:2:3|d\nbad line\napi.requests:1|c|#route:/x,#code:200\n";
    let mut w = Worker::default();
    // Warm up: series are born, sketches get their bins, sets their members.
    for _ in 0..3 {
        ing.ingest(dgram, clock.now(), &mut w);
    }
    ALLOCS.with(|c| c.set(Some(0)));
    for _ in 0..1000 {
        ing.ingest(dgram, clock.now(), &mut w);
    }
    let allocs = ALLOCS.with(|c| c.replace(None));
    assert_eq!(w.counts.lines, 7 * 1003);
    assert_eq!(allocs, Some(0), "ingest allocated on existing series");

    // The same with tag styles turned off (the switches are a Copy value
    // read per line, nothing built): every style off, and only DogStatsD.
    let none = ParseOptions::default().tag_styles(TagStyles::NONE);
    let dog = ParseOptions::default().tag_styles(TagStyles::DOGSTATSD);
    let named = b"api.requests,route=/x:1|c\napi.requests#route=/y:1|c|#code:200\n\
        api.latency[route=/x]:3|ms\n";
    for opts in [none, dog] {
        for d in [&dgram[..], &named[..]] {
            ing.ingest_with(d, opts, clock.now(), &mut w);
        }
    }
    ALLOCS.with(|c| c.set(Some(0)));
    for _ in 0..500 {
        for opts in [none, dog] {
            for d in [&dgram[..], &named[..]] {
                ing.ingest_with(d, opts, clock.now(), &mut w);
            }
        }
    }
    let allocs = ALLOCS.with(|c| c.replace(None));
    assert_eq!(allocs, Some(0), "ingest allocated with tag styles off");
}

#[test]
fn routing_lines_to_the_ingest_workers_allocates_nothing_once_warm() {
    use rollstat::ingest::route::{spawn_workers, Router};

    let cfg = Config::parse("").unwrap();
    let clock = ManualClock::new();
    let services = Arc::new(ServiceHandle::new(
        Services::new(cfg.service_settings(), clock.now(), None).unwrap(),
    ));
    let ing = Arc::new(Ingestor::new(
        Arc::new(Registry::new(Plan::new(cfg.series_settings()), 16)),
        Arc::new(Telemetry::new().unwrap()),
        Arc::new(clock.clone()),
        services,
    ));
    let (workers, handles) = spawn_workers(2, &ing).unwrap();
    let mut r = Router::new(workers);
    let dgram = b"api.requests:1|c|#route:/x\nqueue.depth:+3|g\napi.latency:12.5|ms\n\
        db.rows:1:2:3|d\nusers:alice|s\n";
    // One round: route, hand over, wait until the workers have applied it
    // (and given the buffers back).
    let round = |r: &mut Router| {
        for _ in 0..20 {
            r.route(dgram, clock.now());
        }
        r.hand_over_all();
        while r.busy() {
            std::thread::yield_now();
        }
    };
    for _ in 0..3 {
        round(&mut r);
    }
    // Only this thread's allocations are counted (the workers' are the
    // ingest path's, tested above).
    ALLOCS.with(|c| c.set(Some(0)));
    for _ in 0..200 {
        round(&mut r);
    }
    let allocs = ALLOCS.with(|c| c.replace(None));
    assert_eq!(allocs, Some(0), "routing allocated once warm");
    drop(r);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        ing.telemetry.lines(rollstat::telemetry::Transport::Udp),
        203 * 20 * 5
    );
}

#[test]
fn relaying_lines_allocates_nothing_on_the_ingest_path_once_warm() {
    use rollstat::relay::{spawn, Relays};
    use rollstat::telemetry::Transport;

    // A sink nobody reads: the sender's sends succeed and are dropped.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = Config::parse(&format!(
        "[[relay]]\nname = \"r\"\naddress = \"{}\"\nflush_interval_ms = 1\n\
         [[relay]]\nname = \"api\"\naddress = \"{}\"\nmatch = \"api.*\"\n",
        sink.local_addr().unwrap(),
        sink.local_addr().unwrap()
    ))
    .unwrap();
    let clock = ManualClock::new();
    let services = Arc::new(ServiceHandle::new(
        Services::new(cfg.service_settings(), clock.now(), None).unwrap(),
    ));
    let telemetry = Arc::new(Telemetry::new().unwrap());
    let relays = Arc::new(Relays::new(&cfg.relays, &telemetry.relay).unwrap());
    // The senders run on the real clock (their flush interval, the stop's
    // deadline); the ingest path on the manual one.
    let real = Arc::new(rollstat::SystemClock::new());
    let senders = spawn(&relays, real.clone()).unwrap();
    let counters = [
        telemetry.relay.counters("r"),
        telemetry.relay.counters("api"),
    ];
    let ing = Ingestor::new(
        Arc::new(Registry::new(Plan::new(cfg.series_settings()), 16)),
        telemetry.clone(),
        Arc::new(clock.clone()),
        services,
    )
    .with_relays(Some(relays.clone()));
    let dgram = b"api.requests:1|c|#route:/x\nqueue.depth:+3|g\napi.latency:12.5|ms|@0.5\n\
        db.rows:1:2:3|d\nusers:alice|s\nbad line\n";
    let mut w = Worker::default();
    // One round as a UDP reader does it: datagrams, then the flush that
    // hands the lines off; then wait until the senders have taken them
    // (and given the buffers back).
    let round = |w: &mut Worker| {
        for _ in 0..20 {
            ing.ingest(dgram, clock.now(), w);
        }
        ing.flush(Transport::Udp, w);
        while counters.iter().any(|c| c.buffered.get() > 0) {
            std::thread::yield_now();
        }
    };
    for _ in 0..5 {
        round(&mut w);
    }
    ALLOCS.with(|c| c.set(Some(0)));
    for _ in 0..200 {
        round(&mut w);
    }
    let allocs = ALLOCS.with(|c| c.replace(None));
    assert_eq!(
        allocs,
        Some(0),
        "relaying allocated on the ingest path once warm"
    );
    relays.stop(real.now() + std::time::Duration::from_secs(10));
    senders.join();
    let sent = |c: &rollstat::telemetry::RelayCounters| c.lines_sent.get();
    assert_eq!(sent(&counters[0]), 205 * 20 * 5);
    assert_eq!(sent(&counters[1]), 205 * 20 * 2);
    for c in &counters {
        assert_eq!(c.dropped.iter().map(|d| d.get()).sum::<u64>(), 0);
    }
}
