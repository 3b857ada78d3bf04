//! The windowed rates on a manual clock: N hits over the window, the
//! bucket being filled left out with ignore-current, buckets rolling out,
//! and a reload's windows.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::window::WindowSpec;

fn window(name: &str, buckets: usize, secs: u64, ignore_current: bool) -> NamedWindow {
    NamedWindow {
        name: name.into(),
        spec: WindowSpec::new(buckets, Duration::from_secs(secs))
            .unwrap()
            .ignore_current(ignore_current),
    }
}

/// The rate of `result` in `window` of the row `d.client` at `now`.
fn rate(r: &HitRates, window: &str, result: usize, now: Timestamp) -> Option<f64> {
    r.read(now)
        .into_iter()
        .find(|(_, d, w, _)| d == "client" && w == window)
        .map(|(_, _, _, rates)| rates[result])
}

const TOTAL: usize = 0;
const OVER: usize = 3;

#[test]
fn n_hits_over_a_window_watched_whole_are_n_over_its_length() {
    let clock = ManualClock::new();
    let start = clock.now();
    let r = HitRates::new(&[window("10s", 10, 1, false)], start);
    // 30 hits, 3 a second for 10 s, 4 of them over the limit.
    for s in 0..10 {
        let over = u64::from(s < 4);
        r.add("d", "client", [3, 3 - over, 0, over, 0], clock.now());
        clock.advance(Duration::from_secs(1));
    }
    // 10 s after the start, at the very start of the 11th (empty) slot:
    // the 9 whole seconds before it, the first second rolled out.
    let now = clock.now();
    assert_eq!(rate(&r, "10s", TOTAL, now), Some(27.0 / 9.0));
    assert_eq!(rate(&r, "10s", OVER, now), Some(3.0 / 9.0));
    // Half a second on: the same hits over 9.5 s.
    let later = now + Duration::from_millis(500);
    assert_eq!(rate(&r, "10s", TOTAL, later), Some(27.0 / 9.5));
    // 20 s on, every bucket has rolled out: 0, the row still there.
    clock.advance(Duration::from_secs(10));
    assert_eq!(rate(&r, "10s", TOTAL, clock.now()), Some(0.0));
}

#[test]
fn ignore_current_leaves_the_bucket_being_filled_out() {
    let clock = ManualClock::new();
    let start = clock.now();
    let r = HitRates::new(
        &[window("plain", 10, 1, false), window("ic", 10, 1, true)],
        start,
    );
    clock.advance(Duration::from_secs(5));
    let mid = clock.now() + Duration::from_millis(500);
    r.add("d", "client", [6, 6, 0, 0, 0], mid);
    // In the same second: the plain window sees 6 hits over the 5.5 s
    // watched; ignore-current sees nothing yet.
    assert_eq!(rate(&r, "plain", TOTAL, mid), Some(6.0 / 5.5));
    assert_eq!(rate(&r, "ic", TOTAL, mid), Some(0.0));
    // Once that second is over, ignore-current reads it, over the 6 whole
    // seconds watched.
    let next = clock.now() + Duration::from_secs(1);
    assert_eq!(rate(&r, "ic", TOTAL, next), Some(6.0 / 6.0));
    assert_eq!(rate(&r, "plain", TOTAL, next), Some(6.0 / 6.0));
}

#[test]
fn a_reload_keeps_an_unchanged_window_and_watches_a_new_one_from_then() {
    let clock = ManualClock::new();
    let start = clock.now();
    let ten = window("10s", 10, 1, false);
    let r = HitRates::new(std::slice::from_ref(&ten), start);
    clock.advance(Duration::from_secs(4));
    r.add("d", "client", [8, 8, 0, 0, 0], clock.now());
    clock.advance(Duration::from_secs(1));
    let two = window("2s", 2, 1, false);
    r.rewindow(&[ten.clone(), two], clock.now());
    clock.advance(Duration::from_millis(500));
    let now = clock.now();
    // `10s` keeps its hits and its watch start: 8 over 5.5 s.
    assert_eq!(rate(&r, "10s", TOTAL, now), Some(8.0 / 5.5));
    // `2s` began at the reload: what came before is not in it.
    assert_eq!(rate(&r, "2s", TOTAL, now), Some(0.0));
    r.add("d", "client", [1, 1, 0, 0, 0], now);
    assert_eq!(rate(&r, "2s", TOTAL, now), Some(1.0 / 0.5));
    // The same windows again change nothing.
    r.rewindow(&[ten, window("2s", 2, 1, false)], now);
    assert_eq!(rate(&r, "10s", TOTAL, now), Some(9.0 / 5.5));
}

#[test]
fn the_family_is_a_gauge_per_result_and_window_and_absent_before_any_hit() {
    let clock = ManualClock::new();
    let r = HitRates::new(&[window("10s", 10, 1, false)], clock.now());
    assert!(r.families(clock.now()).is_empty());
    r.add("d", "client", [1, 1, 0, 0, 0], clock.now());
    let f = r.families(clock.now() + Duration::from_secs(1));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].name(), "rollstat_rls_hits_rate");
    assert_eq!(f[0].get_metric().len(), RESULTS.len());
}
