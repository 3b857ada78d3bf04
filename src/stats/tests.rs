use super::*;
use crate::window::bucket::Observation;
use crate::window::WindowSpec;

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

fn ms(n: u64) -> Timestamp {
    T0 + Duration::from_millis(n)
}

#[test]
fn rate_divides_by_whole_slots_plus_the_elapsed_part_of_the_current_one() {
    // 10 x 100 ms. 50 adds spread over the first 500 ms, read at 950 ms:
    // covered = 9 whole slots + 50 ms = 950 ms.
    let spec = WindowSpec::new(10, Duration::from_millis(100)).unwrap();
    let mut w = RollingWindow::<SumCount>::new(spec, T0);
    for i in 0..50 {
        w.add(2.0, ms(i * 10));
    }
    let s = WindowStats::of(&w, ms(950));
    assert_eq!(s.covered, Duration::from_millis(950));
    assert!((s.rate() - 50.0 / 0.95).abs() < 1e-9);
    assert!((s.sum_rate() - 100.0 / 0.95).abs() < 1e-9);
    assert_eq!(s.avg(), Some(2.0));
    assert_eq!(s.min(), None);
}

#[test]
fn with_ignore_current_the_rate_uses_whole_buckets_only() {
    let spec = WindowSpec::new(10, Duration::from_millis(100))
        .unwrap()
        .ignore_current(true);
    let mut w = RollingWindow::<SumCount>::new(spec, T0);
    for i in 0..90 {
        w.add(1.0, ms(i * 10));
    }
    w.add(1.0, ms(905)); // in the current bucket: left out
    let s = WindowStats::of(&w, ms(950));
    assert_eq!(s.count(), 90.0);
    assert_eq!(s.covered, Duration::from_millis(900));
    assert!((s.rate() - 100.0).abs() < 1e-9);
}

#[test]
fn weighted_summary_stats_min_max_and_avg() {
    let spec = WindowSpec::new(4, Duration::from_secs(1)).unwrap();
    let mut w = RollingWindow::<Summary>::epoch_aligned(spec, T0);
    w.add(Observation::sampled(3.0, 0.5), T0);
    w.add(Observation::new(-1.0), ms(1500));
    let s = WindowStats::of(&w, ms(1500));
    assert_eq!(s.sum(), 5.0);
    assert_eq!(s.count(), 3.0);
    assert_eq!((s.min(), s.max()), (Some(-1.0), Some(3.0)));
    assert_eq!(s.avg(), Some(5.0 / 3.0));
    let empty = WindowStats::of(&w, ms(10_000));
    assert_eq!((empty.min(), empty.max(), empty.avg()), (None, None, None));
    assert_eq!(empty.rate(), 0.0);
}

#[test]
fn quantiles_merge_across_buckets_within_one_percent() {
    let spec = WindowSpec::new(10, Duration::from_secs(1)).unwrap();
    let mut w = RollingWindow::<Distribution>::epoch_aligned(spec, T0);
    for i in 1..=1000u64 {
        // One value per ms for a second: spread over two buckets.
        w.add(
            Observation::new(i as f64),
            T0 + Duration::from_micros(i * 1500),
        );
    }
    let s = WindowStats::of(&w, ms(1600));
    for (q, exact) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
        let got = s.quantile(q).unwrap();
        assert!((got - exact).abs() / exact <= 0.0101, "q{q}: {got}");
    }
    assert_eq!(s.quantile(1.0), Some(1000.0));
}

#[test]
fn distinct_members_of_a_set_window() {
    let spec = WindowSpec::new(2, Duration::from_secs(1)).unwrap();
    let mut w = RollingWindow::<Distinct>::epoch_aligned(spec, T0);
    for u in ["a", "b", "a"] {
        w.add(crate::sketch::hash_member(u.as_bytes()), T0);
    }
    w.add(crate::sketch::hash_member(b"c"), ms(1200));
    assert_eq!(WindowStats::distinct(&w, ms(1200)), 3);
    assert_eq!(WindowStats::distinct(&w, ms(2100)), 1);
}

#[test]
fn per_second_of_zero_coverage_is_zero() {
    assert_eq!(per_second(5.0, Duration::ZERO), 0.0);
}
