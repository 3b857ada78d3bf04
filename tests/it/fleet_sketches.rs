//! Fleet quantiles, min and max through real `redis-server` processes:
//! three daemons each get a third of a known stream of timer samples and
//! every one of them publishes the quantiles of the union (within the
//! sketch's 1 %) and its exact min and max; on one server and on a
//! three-master cluster. An instance that sends no range (an older
//! rollstat, simulated by writing its fields as it would) leaves the fleet
//! range and quantiles out, counted, and the samples still add up.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::redis::config;
use crate::redis_server::{Cluster, Redis};
use crate::support::{sample_value, wait_true, Daemon};

/// Samples in the stream.
const N: usize = 3000;
const QS: [f64; 3] = [0.5, 0.9, 0.99];

/// The i-th sample in ms: log-uniform over 0.1 ms .. 5 s (golden-ratio
/// steps), three decimals.
fn sample_ms(i: usize) -> f64 {
    let u = (i as f64 * 0.618_033_988_749_895).fract();
    (0.1 * 50_000f64.powf(u) * 1000.0).round() / 1000.0
}

fn fleet_config(redis: &str) -> String {
    config(
        &format!("{redis}\ntimeout_ms = 500\nsync_interval_ms = 100\nsync_timeout_ms = 300"),
        r#"
[[windows]]
name = "w"
buckets = 60
interval_ms = 1000

[[mappings]]
match = "lat"
shared = true
"#,
    )
}

/// Sends the samples `i` with `i % 3 == part` as `lat:<ms>|ms`, 40 a
/// datagram.
fn send_part(d: &Daemon, part: usize) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let lines: Vec<String> = (0..N)
        .filter(|i| i % 3 == part)
        .map(|i| format!("lat:{}|ms", sample_ms(i)))
        .collect();
    for chunk in lines.chunks(40) {
        s.send_to(chunk.join("\n").as_bytes(), d.udp).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn fleet(name: &str, q: Option<f64>) -> String {
    match q {
        Some(q) => {
            format!("rollstat_fleet_window_quantile{{metric=\"lat\",window=\"w\",q=\"{q}\"}}")
        }
        None => format!("rollstat_fleet_window_{name}{{metric=\"lat\",window=\"w\"}}"),
    }
}

/// Three daemons, a third of the stream each: every daemon's fleet view
/// holds the union.
fn three_daemons_publish_the_quantiles_of_the_union(redis: &str) -> Vec<Daemon> {
    let cfg = fleet_config(redis);
    let daemons: Vec<Daemon> = (0..3).map(|_| Daemon::start_with(&cfg)).collect();
    for (part, d) in daemons.iter().enumerate() {
        send_part(d, part);
    }
    let mut sorted: Vec<f64> = (0..N).map(|i| sample_ms(i) / 1000.0).collect();
    sorted.sort_by(f64::total_cmp);
    for d in &daemons {
        wait_true(
            Duration::from_secs(15),
            "the fleet view of every sample",
            || {
                d.metric(&fleet("samples", None)) == Some(N as f64)
                    && d.metric(&fleet("max", None)).is_some()
            },
        );
    }
    for d in &daemons {
        let body = d.get("/metrics", &[]).text();
        let value = |p: &str| sample_value(&body, p).unwrap_or_else(|| panic!("no {p}"));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        let (min, max) = (value(&fleet("min", None)), value(&fleet("max", None)));
        assert!(close(min, sorted[0]), "fleet min {min} vs {}", sorted[0]);
        assert!(
            close(max, sorted[N - 1]),
            "fleet max {max} vs {}",
            sorted[N - 1]
        );
        for q in QS {
            let exact = sorted[(q * (N - 1) as f64) as usize];
            let got = value(&fleet("", Some(q)));
            assert!(
                (got - exact).abs() <= 0.01 * exact,
                "fleet p{q}: {got} vs the union's {exact}"
            );
        }
        // The JSON API shows them beside the local window.
        let all = d.series("lat");
        let w = &all[0]["windows"]["w"];
        assert_eq!(w["samples"], (N / 3) as f64, "{all}");
        assert_eq!(w["fleet"]["samples"], N as f64, "{all}");
        assert!(
            close(w["fleet"]["max"].as_f64().unwrap(), sorted[N - 1]),
            "{all}"
        );
        let p99 = w["fleet"]["quantiles"]["0.99"].as_f64().unwrap();
        assert_eq!(
            Some(p99),
            sample_value(&body, &fleet("", Some(0.99))),
            "{all}"
        );
    }
    println!(
        "fleet p50/p90/p99 of {N} samples over 3 daemons: {:?}",
        QS.map(|q| daemons[0].metric(&fleet("", Some(q))).unwrap())
    );
    daemons
}

#[test]
fn three_daemons_on_one_redis_publish_fleet_quantiles_min_and_max() {
    let Some(redis) = Redis::start() else { return };
    let daemons = three_daemons_publish_the_quantiles_of_the_union(&redis.section());
    assert_eq!(
        daemons[0].metric("rollstat_fleet_partial_windows"),
        Some(0.0)
    );
    // An older instance adds 5 samples to a bucket as its script would:
    // sums and counts only. The samples add up; the range and quantiles,
    // which no longer cover every sample, are left out and counted.
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("rollstat:win:*")
        .query(&mut c)
        .unwrap();
    let key = keys
        .iter()
        .find(|k| !k.contains(":q:"))
        .expect("the window's hash");
    let fields: Vec<String> = redis::cmd("HKEYS").arg(key).query(&mut c).unwrap();
    let slot = fields
        .iter()
        .find_map(|f| f.strip_suffix(":c"))
        .expect("a bucket");
    for (f, v) in [("s", 0.5), ("c", 5.0)] {
        let _: f64 = redis::cmd("HINCRBYFLOAT")
            .arg(key)
            .arg(format!("{slot}:{f}"))
            .arg(v)
            .query(&mut c)
            .unwrap();
    }
    let d = &daemons[0];
    wait_true(
        Duration::from_secs(5),
        "the older instance's samples",
        || d.metric(&fleet("samples", None)) == Some(N as f64 + 5.0),
    );
    wait_true(Duration::from_secs(5), "the range left out", || {
        d.metric("rollstat_fleet_partial_windows") == Some(1.0)
            && d.metric(&fleet("max", None)).is_none()
            && d.metric(&fleet("", Some(0.99))).is_none()
    });
    assert!(d.metric("rollstat_window_max{").is_some());
}

#[test]
fn three_daemons_on_a_three_node_cluster_publish_fleet_quantiles() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    three_daemons_publish_the_quantiles_of_the_union(&cluster.section());
}

/// One instance, its sync held past its deadline by `CLIENT PAUSE`: the
/// batch in doubt goes again under its number, and the fleet bins end up
/// exactly the local ones (a batch applied twice would double its bins'
/// counts and the samples, a lost one leave them short).
#[test]
fn a_timed_out_sync_of_timer_bins_is_applied_once() {
    let Some(redis) = Redis::start() else { return };
    let d = Daemon::start_with(&fleet_config(&redis.section()));
    send_part(&d, 0);
    wait_true(Duration::from_secs(10), "the first third", || {
        d.metric(&fleet("samples", None)) == Some(1000.0)
    });
    let errors = || {
        d.metric("rollstat_store_errors_total{op=\"windows\"}")
            .unwrap_or(0.0)
    };
    let before = errors();
    assert_eq!(redis.cli_command(&["CLIENT", "PAUSE", "1500"]), "OK");
    let paused = Instant::now();
    send_part(&d, 1);
    wait_true(Duration::from_secs(5), "a window sync to time out", || {
        errors() > before
    });
    assert!(
        paused.elapsed() < Duration::from_millis(1500),
        "the machine is too slow for this test: the pause ended first"
    );
    wait_true(Duration::from_secs(10), "the fleet view of 2000", || {
        d.metric(&fleet("samples", None)) == Some(2000.0)
    });
    std::thread::sleep(Duration::from_millis(500));
    let body = d.get("/metrics", &[]).text();
    let value = |p: &str| sample_value(&body, p).unwrap_or_else(|| panic!("no {p}"));
    assert_eq!(value(&fleet("samples", None)), 2000.0);
    for q in QS {
        let local = format!("rollstat_window_quantile{{metric=\"lat\",window=\"w\",q=\"{q}\"}}");
        assert_eq!(value(&fleet("", Some(q))), value(&local), "p{q}");
    }
    for m in ["min", "max"] {
        let local = format!("rollstat_window_{m}{{metric=\"lat\",window=\"w\"}}");
        assert_eq!(value(&fleet(m, None)), value(&local), "{m}");
    }
    let unconfirmed = "rollstat_store_unshared_deltas_total{reason=\"unconfirmed\"}";
    assert_eq!(d.metric(unconfirmed), Some(0.0), "nothing given up");
}

/// Timer values from 1e-9 to 1e300 in one bucket, and NaN and Inf: the
/// bad ones are refused as ever, and a bucket's bins in Redis stay within
/// `max_shared_bins` (512), the lowest folded and counted.
#[test]
fn hostile_timer_values_keep_a_buckets_bins_in_redis_within_the_cap() {
    let Some(redis) = Redis::start() else { return };
    let d = Daemon::start_with(&fleet_config(&redis.section()));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let lines: Vec<String> = (0..4000)
        .map(|i| {
            format!(
                "lat:{:e}|ms",
                10f64.powf(-9.0 + 309.0 * f64::from(i) / 4000.0)
            )
        })
        .chain(["lat:nan|ms".into(), "lat:inf|ms".into()])
        .collect();
    for chunk in lines.chunks(40) {
        s.send_to(chunk.join("\n").as_bytes(), d.udp).unwrap();
    }
    wait_true(Duration::from_secs(10), "the fleet view of 4000", || {
        d.metric(&fleet("samples", None)) == Some(4000.0)
    });
    assert!(d.metric("rollstat_fleet_folded_deltas_total").unwrap() >= 1.0);
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("rollstat:win:*:q:*")
        .query(&mut c)
        .unwrap();
    assert!(!keys.is_empty());
    let mut bytes = 0;
    for k in &keys {
        let n: usize = redis::cmd("HLEN").arg(k).query(&mut c).unwrap();
        assert!(n <= 512, "{k} holds {n} bins");
        let b: usize = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(k)
            .query(&mut c)
            .unwrap();
        bytes = bytes.max(b);
    }
    // The documented bound: about 30 KB for a bucket's 512 bins.
    assert!(bytes <= 40_000, "a bucket's bins take {bytes} B");
    let max = d.metric(&fleet("max", None)).unwrap();
    let sent: f64 = format!("{:e}", 10f64.powf(-9.0 + 309.0 * 3999.0 / 4000.0))
        .parse()
        .unwrap();
    assert!((max - sent / 1000.0).abs() <= 1e-12 * max, "max {max}");
    println!(
        "hostile timer values: largest bins key {bytes} B in {} keys",
        keys.len()
    );
}
