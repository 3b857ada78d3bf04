//! Edge cases of the rolling window, each on explicit timestamps. The cases
//! follow go-zero's behaviour as recorded in `shared/reference/semantics.md`
//! section 1.6 (verified there by running go-zero's code with a fake clock).

use std::time::Duration;

use super::bucket::SumCount;
use super::ring::{Read, Ring};
use super::*;
use super::{Layout, Windows};

/// Creation instant of most windows below: a realistic Unix time that is not
/// a multiple of any interval used, so creation-anchored and epoch-anchored
/// grids differ.
const T0: u64 = 1_767_225_600_123_456_789;

fn at_ms(ms: u64) -> Timestamp {
    Timestamp::from_nanos(T0 + ms * 1_000_000)
}

fn at_ns(ns: u64) -> Timestamp {
    Timestamp::from_nanos(T0 + ns)
}

fn spec(size: usize, interval_ms: u64) -> WindowSpec {
    WindowSpec::new(size, Duration::from_millis(interval_ms)).unwrap()
}

fn window(size: usize, interval_ms: u64) -> RollingWindow<SumCount> {
    RollingWindow::new(spec(size, interval_ms), at_ms(0))
}

fn sum_at(w: &RollingWindow<SumCount>, t: Timestamp) -> f64 {
    w.reduce(t).sum
}

/// The bucket sums a reduce visits, oldest first.
fn visited(w: &RollingWindow<SumCount>, t: Timestamp) -> Vec<f64> {
    let mut out = Vec::new();
    let n = w.visit(t, |b| out.push(b.sum));
    assert_eq!(n, out.len());
    out
}

#[test]
fn spec_rejects_zero_buckets_zero_interval_and_overflow() {
    assert_eq!(
        WindowSpec::new(0, Duration::from_secs(1)),
        Err(WindowSpecError::NoBuckets)
    );
    assert!(matches!(
        WindowSpec::new(3, Duration::ZERO),
        Err(WindowSpecError::ZeroInterval(_))
    ));
    assert!(matches!(
        WindowSpec::new(usize::MAX, Duration::from_secs(1)),
        Err(WindowSpecError::TooLong { .. })
    ));
    let s = spec(10, 100).ignore_current(true);
    assert_eq!(s.length(), Duration::from_secs(1));
    assert!(s.ignores_current());
}

#[test]
fn fresh_window_visits_every_bucket_and_they_are_empty() {
    let w = window(4, 100);
    assert_eq!(visited(&w, at_ms(0)), vec![0.0; 4]);
    let w = RollingWindow::<SumCount>::new(spec(4, 100).ignore_current(true), at_ms(0));
    assert_eq!(visited(&w, at_ms(0)), vec![0.0; 3]);
}

#[test]
fn write_exactly_on_a_boundary_goes_to_the_new_bucket_and_one_ns_before_stays() {
    let mut w = window(3, 100);
    w.add(1.0, at_ms(0));
    w.add(2.0, at_ns(100_000_000 - 1));
    assert_eq!(visited(&w, at_ns(100_000_000 - 1)), vec![0.0, 0.0, 3.0]);
    w.add(4.0, at_ms(100));
    assert_eq!(visited(&w, at_ms(100)), vec![0.0, 3.0, 4.0]);
    assert_eq!(w.last_slot_start(), at_ms(100));
}

#[test]
fn a_value_is_visible_from_its_slot_start_until_exactly_size_intervals_later() {
    // Written at 150 ms into the slot starting at a = 100 ms.
    let mut w = window(5, 100);
    w.add(7.0, at_ms(150));
    assert_eq!(sum_at(&w, at_ms(100)), 7.0);
    assert_eq!(sum_at(&w, at_ns(600_000_000 - 1)), 7.0);
    assert_eq!(sum_at(&w, at_ms(600)), 0.0);
}

#[test]
fn with_ignore_current_a_value_appears_one_interval_after_its_slot_start() {
    let mut w = RollingWindow::<SumCount>::new(spec(5, 100).ignore_current(true), at_ms(0));
    w.add(7.0, at_ms(150));
    assert_eq!(sum_at(&w, at_ms(150)), 0.0);
    assert_eq!(sum_at(&w, at_ns(200_000_000 - 1)), 0.0);
    assert_eq!(sum_at(&w, at_ms(200)), 7.0);
    assert_eq!(sum_at(&w, at_ns(600_000_000 - 1)), 7.0);
    assert_eq!(sum_at(&w, at_ms(600)), 0.0);
}

#[test]
fn ignore_current_only_matters_while_time_is_in_the_last_written_slot() {
    let mut on = RollingWindow::<SumCount>::new(spec(4, 100).ignore_current(true), at_ms(0));
    let mut off = window(4, 100);
    for w in [&mut on, &mut off] {
        w.add(1.0, at_ms(10));
        w.add(2.0, at_ms(110));
    }
    // Still inside the last-written slot [100, 200): `on` leaves it out.
    assert_eq!(visited(&on, at_ms(150)), vec![0.0, 0.0, 1.0]);
    assert_eq!(visited(&off, at_ms(150)), vec![0.0, 0.0, 1.0, 2.0]);
    // Time moved to [200, 300), not yet written: both skip that slot and agree.
    assert_eq!(visited(&on, at_ms(250)), vec![0.0, 1.0, 2.0]);
    assert_eq!(visited(&off, at_ms(250)), vec![0.0, 1.0, 2.0]);
    // Once the new slot is written, `on` leaves it out again.
    on.add(4.0, at_ms(250));
    off.add(4.0, at_ms(250));
    assert_eq!(visited(&on, at_ms(250)), vec![0.0, 1.0, 2.0]);
    assert_eq!(visited(&off, at_ms(250)), vec![0.0, 1.0, 2.0, 4.0]);
}

#[test]
fn reduce_skips_expired_buckets_instead_of_visiting_zeros() {
    let mut w = window(5, 100);
    w.add(1.0, at_ms(0));
    w.add(2.0, at_ms(100));
    // span = 2 at 350 ms: 5 - 2 = 3 buckets visited, oldest first.
    assert_eq!(visited(&w, at_ms(350)), vec![0.0, 1.0, 2.0]);
}

#[test]
fn a_gap_of_exactly_size_intervals_resets_everything() {
    let mut w = window(4, 100);
    w.add(1.0, at_ms(0));
    w.add(2.0, at_ms(400));
    assert_eq!(visited(&w, at_ms(400)), vec![0.0, 0.0, 0.0, 2.0]);
}

#[test]
fn a_gap_of_size_minus_one_intervals_keeps_the_old_bucket() {
    let mut w = window(4, 100);
    w.add(1.0, at_ms(0));
    w.add(2.0, at_ms(300));
    assert_eq!(visited(&w, at_ms(300)), vec![1.0, 0.0, 0.0, 2.0]);
}

#[test]
fn off_grid_writes_never_move_the_grid() {
    // semantics.md: writes at 0, 45, 65 ms with I = 30 ms land in slots 0, 30, 60.
    let mut w = window(4, 30);
    for (ms, slot) in [(0, 0), (45, 30), (65, 60)] {
        w.add(1.0, at_ms(ms));
        assert_eq!(w.last_slot_start(), at_ms(slot));
    }
}

#[test]
fn the_first_write_long_after_creation_lands_on_the_creation_grid() {
    let mut w = window(4, 100);
    w.add(1.0, at_ms(250));
    assert_eq!(w.last_slot_start(), at_ms(200));
}

#[test]
fn a_long_idle_gap_resets_all_and_moves_to_the_latest_grid_point() {
    let mut w = window(10, 100);
    w.add(5.0, at_ms(0));
    w.add(1.0, at_ms(1_000_037));
    assert_eq!(w.last_slot_start(), at_ms(1_000_000));
    assert_eq!(w.reduce(at_ms(1_000_037)).count, 1);
    // And the grid still holds afterwards.
    w.add(1.0, at_ms(1_000_199));
    assert_eq!(w.last_slot_start(), at_ms(1_000_100));
}

#[test]
fn reduce_never_changes_state_even_after_a_long_gap() {
    let mut w = window(4, 100);
    w.add(3.0, at_ms(0));
    let before = format!("{w:?}");
    assert_eq!(sum_at(&w, at_ms(10_000)), 0.0);
    assert_eq!(sum_at(&w, at_ms(10_000)), 0.0);
    assert_eq!(format!("{w:?}"), before);
    // Back within range of the stored data, it is all still there.
    assert_eq!(sum_at(&w, at_ms(50)), 3.0);
}

#[test]
fn every_add_counts_including_zero_and_negative_values() {
    let mut w = window(2, 100);
    for v in [0.0, -2.0, 5.0] {
        w.add(v, at_ms(1));
    }
    assert_eq!(w.reduce(at_ms(1)), SumCount { sum: 3.0, count: 3 });
}

#[test]
fn a_single_bucket_window_reports_until_the_slot_ends() {
    let mut w = window(1, 100);
    w.add(2.0, at_ms(10));
    assert_eq!(visited(&w, at_ms(99)), vec![2.0]);
    assert_eq!(visited(&w, at_ms(100)), Vec::<f64>::new());
    w.add(3.0, at_ms(150));
    assert_eq!(visited(&w, at_ms(150)), vec![3.0]);
}

#[test]
fn a_single_bucket_window_with_ignore_current_never_reports() {
    let mut w = RollingWindow::<SumCount>::new(spec(1, 100).ignore_current(true), at_ms(0));
    for ms in [0, 50, 100, 250] {
        w.add(1.0, at_ms(ms));
        assert_eq!(w.visit(at_ms(ms), |_| {}), 0);
        assert_eq!(w.visit(at_ms(ms + 100), |_| {}), 0);
    }
    assert_eq!(w.covered(at_ms(300)), Duration::ZERO);
}

#[test]
fn time_going_backwards_writes_into_the_current_slot_and_resets_nothing() {
    let mut w = window(4, 100);
    w.add(1.0, at_ms(0));
    w.add(2.0, at_ms(250));
    // 50 ms behind the last slot start (200): counts as inside it.
    w.add(4.0, at_ms(150));
    // A whole 2 s behind: still the same slot; no wipe, no panic.
    w.add(8.0, Timestamp::from_nanos(T0 - 2_000_000_000));
    assert_eq!(w.last_slot_start(), at_ms(200));
    assert_eq!(visited(&w, at_ms(150)), vec![0.0, 1.0, 0.0, 14.0]);
    assert_eq!(sum_at(&w, Timestamp::EPOCH), 15.0);
    // Time resumes normally from the last slot.
    w.add(16.0, at_ms(310));
    assert_eq!(visited(&w, at_ms(310)), vec![1.0, 0.0, 14.0, 16.0]);
}

#[test]
fn epoch_aligned_windows_share_boundaries_whenever_they_were_created() {
    let s = spec(10, 1000);
    let a = RollingWindow::<SumCount>::epoch_aligned(s, Timestamp::from_millis(5_300));
    let b = RollingWindow::<SumCount>::epoch_aligned(s, Timestamp::from_millis(5_999));
    assert_eq!(a.last_slot_start(), Timestamp::from_secs(5));
    assert_eq!(b.last_slot_start(), Timestamp::from_secs(5));
    let mut c = RollingWindow::<SumCount>::epoch_aligned(s, Timestamp::from_millis(1_234));
    c.add(1.0, Timestamp::from_millis(7_777));
    assert_eq!(c.last_slot_start(), Timestamp::from_secs(7));
}

#[test]
fn an_origin_after_now_still_puts_now_in_a_grid_slot() {
    let s = spec(4, 100);
    let w = RollingWindow::<SumCount>::with_origin(s, at_ms(1_000), at_ms(750));
    assert_eq!(w.last_slot_start(), at_ms(700));
}

#[test]
fn covered_time_counts_whole_past_slots_and_the_elapsed_part_of_the_current() {
    let mut w = window(10, 100);
    w.add(1.0, at_ms(0));
    assert_eq!(w.covered(at_ms(30)), Duration::from_millis(930));
    // Slots that expired since the last write still count as covered time.
    assert_eq!(w.covered(at_ms(5_020)), Duration::from_millis(920));
    let on = RollingWindow::<SumCount>::new(spec(10, 100).ignore_current(true), at_ms(0));
    assert_eq!(on.covered(at_ms(30)), Duration::from_millis(900));
    assert_eq!(on.covered(at_ms(5_099)), Duration::from_millis(900));
}

#[test]
fn covered_time_never_reaches_before_the_window_was_watched() {
    // 10 x 100 ms, watched from 250 ms (the daemon started then).
    let w = window(10, 100).watched_from(at_ms(250));
    assert_eq!(w.covered(at_ms(250)), Duration::ZERO);
    assert_eq!(w.covered(at_ms(430)), Duration::from_millis(180));
    // Full once the window's whole span has been watched.
    assert_eq!(w.covered(at_ms(1_230)), Duration::from_millis(930));
    assert_eq!(w.covered(at_ms(5_030)), Duration::from_millis(930));
    // Ignore-current: whole slots only, from the watch on.
    let on = RollingWindow::<SumCount>::new(spec(10, 100).ignore_current(true), at_ms(0))
        .watched_from(at_ms(250));
    assert_eq!(on.covered(at_ms(280)), Duration::ZERO);
    assert_eq!(on.covered(at_ms(430)), Duration::from_millis(150));
    assert_eq!(on.covered(at_ms(2_000)), Duration::from_millis(900));
    // A watch later than `now` (a clock read out of order) covers nothing.
    assert_eq!(on.covered(at_ms(100)), Duration::ZERO);
    // `spanned` ignores the watch (the fleet's denominator).
    assert_eq!(w.spanned(at_ms(430)), Duration::from_millis(930));
    assert_eq!(on.spanned(at_ms(430)), Duration::from_millis(900));
}

#[test]
fn advance_and_current_mut_write_the_bucket_for_now() {
    let mut w = window(3, 100);
    w.add(1.0, at_ms(0));
    w.advance(at_ms(120));
    w.current_mut().add(5.0);
    assert_eq!(visited(&w, at_ms(120)), vec![0.0, 1.0, 5.0]);
}

#[test]
fn shared_window_adds_from_two_threads_lose_nothing() {
    let w = SharedWindow::new(window(10, 100));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for i in 0..10_000u64 {
                    w.add(1.0, at_ns(i * 10_000));
                }
            });
        }
    });
    // All adds fall within the first 100 ms: nothing expired.
    assert_eq!(w.reduce(at_ms(99)).count, 20_000);
    assert_eq!(w.with(|w| w.reduce(at_ms(99)).sum), 20_000.0);
}

#[test]
fn visit_slots_names_every_unexpired_bucket_by_its_grid_slot_newest_first() {
    let s = Duration::from_secs;
    let spec = WindowSpec::new(3, s(1)).unwrap().ignore_current(true);
    let t0 = Timestamp::from_secs(1_000);
    let mut w: RollingWindow<SumCount> = RollingWindow::epoch_aligned(spec, t0);
    w.add(1.0, t0 + Duration::from_millis(200));
    w.add(2.0, t0 + Duration::from_millis(1500));
    let mut seen = Vec::new();
    w.visit_slots(t0 + Duration::from_millis(1600), |t, b| {
        seen.push((t.as_nanos() / 1_000_000_000, b.sum))
    });
    // The current slot is included even with ignore-current.
    assert_eq!(seen, [(1001, 2.0), (1000, 1.0), (999, 0.0)]);
    seen.clear();
    w.visit_slots(t0 + Duration::from_millis(3100), |t, b| {
        seen.push((t.as_nanos() / 1_000_000_000, b.sum))
    });
    // Two slots expired since the last write: only 1001 is left.
    assert_eq!(seen, [(1001, 2.0)]);
}

#[test]
fn rebucketed_moves_each_bucket_to_the_new_slot_holding_its_start() {
    // 4 buckets of 100 ms: adds of 1, 2, 3, 4 at 0, 100, 200, 300 ms.
    let mut w = window(4, 100);
    for i in 0..4u64 {
        w.add((i + 1) as f64, at_ms(i * 100 + 10));
    }
    let now = at_ms(350);
    // Same span in 2 buckets of 200 ms on a grid through 0 ms: {1+2} {3+4}.
    let two = w.rebucketed(spec(2, 200), at_ms(0), now);
    assert_eq!(visited(&two, now), [3.0, 7.0]);
    // A shorter window (2 of 100 ms) keeps only its own span: {3} {4}.
    let short = w.rebucketed(spec(2, 100), at_ms(0), now);
    assert_eq!(visited(&short, now), [3.0, 4.0]);
    // A longer one keeps everything: 8 of 100 ms.
    let long = w.rebucketed(spec(8, 100), at_ms(0), now);
    assert_eq!(long.reduce(now).sum, 10.0);
    assert_eq!(long.reduce(now).count, 4);
    // And goes on from there: the 1 leaves at 800 ms.
    assert_eq!(long.reduce(at_ms(800)).sum, 9.0);
}

#[test]
fn a_resized_ring_keeps_its_newest_buckets() {
    let mut r = Ring::<SumCount>::with_origin(4, 100_000_000, at_ms(0), at_ms(0));
    for (i, t) in [0u64, 100, 200, 300, 400, 500].iter().enumerate() {
        r.add(i as f64, at_ms(*t));
    }
    let all = |r: &Ring<SumCount>| {
        let mut out = Vec::new();
        r.visit(&Read::newest(r.len(), false), at_ms(500), |b| {
            out.push(b.sum)
        });
        out
    };
    assert_eq!(all(&r), vec![2.0, 3.0, 4.0, 5.0]);
    let grown = r.clone().resized(7);
    // Three older, empty buckets; the four newest unchanged.
    assert_eq!(all(&grown), vec![0.0, 0.0, 0.0, 2.0, 3.0, 4.0, 5.0]);
    let shrunk = r.resized(2);
    assert_eq!(all(&shrunk), vec![4.0, 5.0]);
    // And it goes on as a ring of its new size.
    let mut shrunk = shrunk;
    shrunk.add(6.0, at_ms(600));
    assert_eq!(all(&shrunk), vec![5.0, 6.0]);
}

#[test]
fn windows_on_one_interval_share_a_ring_and_a_relayout_keeps_it() {
    use std::sync::Arc;
    let ten = spec(10, 1000);
    let minute = spec(60, 1000).ignore_current(true);
    let other = spec(5, 2000);
    let layout = Arc::new(Layout::new([ten, minute, other].map(|s| (s, at_ms(0)))));
    assert_eq!((layout.rings(), layout.buckets()), (2, 65));
    let mut w = Windows::<SumCount>::new(layout, at_ms(0));
    for s in 0..30 {
        w.add(1.0, at_ms(1000 * s));
    }
    let now = at_ms(29_500);
    assert_eq!(w.reduce(0, now).sum, 10.0);
    assert_eq!(w.reduce(1, now).sum, 29.0);
    // Only `10s` left: the ring shrinks to 10, its history kept.
    w.relayout(Arc::new(Layout::new([(ten, at_ms(0))])), now);
    assert_eq!(w.reduce(0, now).sum, 10.0);
    assert_eq!(w.len(), 1);
}

#[test]
fn a_distribution_bucket_builds_its_sketch_at_the_second_distinct_value() {
    use super::bucket::{Distribution, Observation};
    let mut b = Distribution::default();
    assert_eq!(b.quantile(0.5), None);
    b.add(Observation::new(0.25));
    b.add(Observation::sampled(0.25, 0.5));
    // One distinct value: no sketch, every quantile is the value itself.
    assert!(format!("{b:?}").contains("sketch: None"), "{b:?}");
    assert_eq!((b.quantile(0.0), b.quantile(1.0)), (Some(0.25), Some(0.25)));
    assert_eq!(b.quantile(1.5), None);
    // A second value: the first enters the sketch with its weight (3).
    b.add(Observation::new(4.0));
    assert!(format!("{b:?}").contains("sketch: Some"), "{b:?}");
    let p50 = b.quantile(0.5).unwrap();
    assert!((p50 - 0.25).abs() <= 0.0025, "{p50}");
    let p99 = b.quantile(1.0).unwrap();
    assert!((p99 - 4.0).abs() <= 0.04, "{p99}");
    // Merging two single-value buckets of different values builds one too.
    let (mut x, mut y) = (Distribution::default(), Distribution::default());
    x.add(Observation::new(1.0));
    y.add(Observation::new(100.0));
    x.merge(&y);
    assert!((x.quantile(1.0).unwrap() - 100.0).abs() <= 1.0);
    assert!((x.quantile(0.0).unwrap() - 1.0).abs() <= 0.01);
    // A reset gives the sketch back.
    x.reset();
    assert!(format!("{x:?}").contains("sketch: None"), "{x:?}");
}
