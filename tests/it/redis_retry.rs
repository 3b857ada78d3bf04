//! A window sync whose answer never came is sent again, not
//! lost and not counted twice.
//!
//! `CLIENT PAUSE` holds the daemon's sync on the server past
//! `sync_timeout_ms`: the writes are sent, their answer misses the deadline,
//! and Redis applies them when the pause ends. The old code counted such a
//! chunk as `unconfirmed` and never sent it again (right here only because
//! the pause ended; lost when the writes never landed). Now the batch stays
//! in doubt and goes again under its sequence number, which the window's
//! script applies at most once: the fleet view is exact, and nothing is
//! counted as given up.

use std::time::{Duration, Instant};

use crate::redis::{send_counts, window_config, FLEET, LOCAL};
use crate::redis_server::Redis;
use crate::support::{wait_true, Daemon};

#[test]
fn a_sync_that_timed_out_is_sent_again_and_applied_once() {
    let Some(redis) = Redis::start() else { return };
    let d = Daemon::start_with(&window_config(
        &format!("{}\nsync_timeout_ms = 300", redis.section()),
        30,
        1000,
    ));
    send_counts(&d, 100);
    wait_true(Duration::from_secs(5), "the fleet view of 100", || {
        d.metric(FLEET) == Some(100.0)
    });
    let errors = |d: &Daemon| {
        d.metric("rollstat_store_errors_total{op=\"windows\"}")
            .unwrap_or(0.0)
    };
    let before = errors(&d);
    // Redis holds every client for 1.5 s; the next syncs time out.
    assert_eq!(redis.cli_command(&["CLIENT", "PAUSE", "1500"]), "OK");
    let paused = Instant::now();
    send_counts(&d, 50);
    wait_true(Duration::from_secs(5), "a window sync to time out", || {
        errors(&d) > before
    });
    assert!(
        paused.elapsed() < Duration::from_millis(1500),
        "the machine is too slow for this test: the pause ended first"
    );
    // After the pause: exactly 150, held (a batch applied twice would show
    // 200, a lost one 100).
    wait_true(Duration::from_secs(10), "the fleet view of 150", || {
        d.metric(FLEET) == Some(150.0)
    });
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(d.metric(FLEET), Some(150.0));
    }
    assert_eq!(d.metric(LOCAL), Some(150.0));
    let unconfirmed = d
        .metric("rollstat_store_unshared_deltas_total{reason=\"unconfirmed\"}")
        .unwrap_or(0.0);
    assert_eq!(unconfirmed, 0.0, "nothing should be given up");
    println!(
        "{} window sync errors during a 1.5 s CLIENT PAUSE; fleet view 150 exactly after it",
        errors(&d) - before
    );
}
