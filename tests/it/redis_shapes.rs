//! Two shapes of one window name on one Redis.
//!
//! Slots are bucket start / interval, and the keys used to name the window
//! but not its shape: during a rolling config change, an instance with 10 x
//! 100 ms buckets trimmed, as too old, every field of an instance with
//! 10 x 1000 ms buckets for the same window name (its slot numbers are ten
//! times smaller), and the slower instance's fleet view fell from 50 to 0.
//! Now the shape is part of the key: neither touches the other's data.

use std::time::{Duration, Instant};

use crate::redis::{send_counts, window_config, FLEET, LOCAL};
use crate::redis_server::Redis;
use crate::support::{wait_true, Daemon};

#[test]
fn two_shapes_of_one_window_name_never_trim_each_other() {
    let Some(redis) = Redis::start() else { return };
    let slow = Daemon::start_with(&window_config(&redis.section(), 10, 1000));
    let fast = Daemon::start_with(&window_config(&redis.section(), 10, 100));
    send_counts(&slow, 50);
    wait_true(
        Duration::from_secs(5),
        "the slow daemon's fleet view",
        || slow.metric(FLEET) == Some(50.0),
    );
    // The fast daemon syncs (and trims its window) every 100 ms while it
    // gets samples; the slow one's 10 s window must keep its 50 all along.
    let started = Instant::now();
    let mut fast_sent = 0;
    while started.elapsed() < Duration::from_secs(3) {
        send_counts(&fast, 5);
        fast_sent += 5;
        std::thread::sleep(Duration::from_millis(100));
        let (local, fleet) = (slow.metric(LOCAL), slow.metric(FLEET));
        assert_eq!(local, Some(50.0), "the slow daemon's own window");
        assert_eq!(
            fleet,
            Some(50.0),
            "the slow daemon's fleet view lost its samples after {:?}",
            started.elapsed()
        );
    }
    // The fast daemon's fleet view is its own window: only its samples.
    wait_true(Duration::from_secs(5), "fast fleet == fast local", || {
        let (l, f) = (fast.metric(LOCAL), fast.metric(FLEET));
        l.is_some() && l == f
    });
    let keys = redis.cli_command(&["--raw", "KEYS", "rollstat:win:*"]);
    let mut keys: Vec<&str> = keys.lines().collect();
    keys.sort();
    assert_eq!(keys.len(), 2, "one key per shape: {keys:?}");
    assert!(
        keys.iter().any(|k| k.ends_with(":w:1000msx10"))
            && keys.iter().any(|k| k.ends_with(":w:100msx10")),
        "{keys:?}"
    );
    // The same series: one identity, one group, so one cluster slot.
    let stem = |k: &str| k.rsplit_once(':').unwrap().0.to_string();
    assert_eq!(stem(keys[0]), stem(keys[1]), "{keys:?}");
    println!(
        "slow daemon's fleet view 50 throughout 3 s of the fast daemon's syncs ({fast_sent} \
         samples sent to it); keys {keys:?}"
    );
}
