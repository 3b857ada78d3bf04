use proptest::prelude::*;

use super::ranks_of;
use super::*;
use crate::sketch::budget::scoped;

/// Feeds `values` in batches of `batch`, as a summary's buffer does.
fn stream_of(values: &[(f64, u64)], epsilon: f64, batch: usize) -> RankStream {
    let mut s = RankStream::new(epsilon);
    for chunk in values.chunks(batch.max(1)) {
        let mut sorted = chunk.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.merge_sorted(&sorted, true);
    }
    s
}

/// Checks the guarantee: for each `q`, the answer is one of the values and
/// the ranks it occupies come within `εn` (and one for rounding) of `q·n`.
fn assert_within(values: &[(f64, u64)], s: &RankStream, epsilon: f64) {
    let n: u64 = values.iter().map(|(_, w)| w).sum();
    assert_eq!(s.count(), n);
    for i in 0..=100 {
        let q = f64::from(i) / 100.0;
        let got = s.quantile(q).expect("values were given");
        assert!(
            values.iter().any(|(v, _)| *v == got),
            "{got} was never given"
        );
        let (lo, hi) = ranks_of(values, got);
        let target = q * n as f64;
        let slack = epsilon * n as f64 + 1.0;
        assert!(
            lo <= target + slack && hi >= target - slack,
            "q {q}: {got} holds ranks {lo}..={hi} of {n}, want {target} ± {slack} ({} tuples)",
            s.tuples.len()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_answer_is_within_the_rank_error(
        values in prop::collection::vec((0u32..2_000, 1u64..4), 1..3_000),
        epsilon in prop::sample::select(vec![0.0, 0.001, 0.01, 0.05, 0.1]),
        batch in 1usize..700,
    ) {
        let values: Vec<(f64, u64)> = values.into_iter().map(|(v, w)| (f64::from(v) / 7.0, w)).collect();
        let (_, ()) = scoped(None, || {
            let s = stream_of(&values, epsilon, batch);
            assert_within(&values, &s, epsilon);
        });
    }

    #[test]
    fn heavy_sample_rates_stay_within_the_rank_error(
        values in prop::collection::vec((0u32..50, prop::sample::select(vec![1u64, 10, 100, 1_000, 10_000])), 1..400),
        epsilon in prop::sample::select(vec![0.001, 0.01, 0.05]),
        batch in 1usize..50,
    ) {
        let values: Vec<(f64, u64)> = values.into_iter().map(|(v, w)| (f64::from(v), w)).collect();
        let (_, ()) = scoped(None, || {
            let s = stream_of(&values, epsilon, batch);
            assert_within(&values, &s, epsilon);
        });
    }
}

#[test]
fn the_stream_stays_small_where_the_error_allows() {
    let (b, ()) = scoped(None, || {
        let values: Vec<(f64, u64)> = (0..100_000u64)
            .map(|i| (((i * 7_919) % 100_003) as f64, 1))
            .collect();
        let s = stream_of(&values, 0.001, 500);
        assert_within(&values, &s, 0.001);
        assert!(s.tuples.len() < 10_000, "{} tuples", s.tuples.len());
        assert_eq!(current_used(), s.heap_bytes());
    });
    assert_eq!(b.used(), 0, "a dropped stream gives its bytes back");
}

fn current_used() -> u64 {
    budget::current().used()
}

#[test]
fn an_exact_stream_answers_the_value_at_the_rank() {
    let (_, ()) = scoped(None, || {
        let values: Vec<(f64, u64)> = (1..=1_000).map(|i| (f64::from(i), 1)).collect();
        let s = stream_of(&values, 0.0, 100);
        assert_eq!(s.quantile(0.5), Some(500.0));
        assert_eq!(s.quantile(0.99), Some(990.0));
        assert_eq!(s.quantile(1.0), Some(1_000.0));
        assert_eq!(s.tuples.len(), 1_000, "ε = 0 folds nothing");
    });
}

#[test]
fn past_the_budget_values_are_coarsened_and_counted() {
    let limit = 4 * 1024;
    let (b, ()) = scoped(Some(limit), || {
        let values: Vec<(f64, u64)> = (0..20_000).map(|i| (f64::from(i), 1)).collect();
        let s = stream_of(&values, 0.0, 100);
        assert!(budget::current().used() <= limit + 2 * TUPLE_BYTES * 100);
        assert_eq!(s.count(), 20_000, "every value is still counted");
        assert!(s.quantile(0.5).is_some());
    });
    assert!(b.coarsened(Coarsened::Quantile) > 0);
}

#[test]
fn an_empty_stream_answers_nothing_and_reset_forgets() {
    let (_, ()) = scoped(None, || {
        let mut s = RankStream::new(0.01);
        assert_eq!(s.quantile(0.5), None);
        s.merge_sorted(&[(1.0, 1), (2.0, 1)], true);
        assert_eq!(s.count(), 2);
        s.reset();
        assert_eq!((s.count(), s.quantile(0.5)), (0, None));
    });
}

/// Feeds `values` in batches into a stream kept at the smallest error
/// `targets` ask (as a summary keeps its streams).
fn targeted_of(values: &[(f64, u64)], targets: &[(f64, f64)], batch: usize) -> RankStream {
    let epsilon = targets.iter().map(|t| t.1).reduce(f64::min).unwrap_or(0.0);
    let mut s = RankStream::new(epsilon);
    for chunk in values.chunks(batch.max(1)) {
        let mut sorted = chunk.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.merge_sorted(&sorted, true);
    }
    s
}

/// Each target's answer is within its own error of its rank.
fn assert_targets(values: &[(f64, u64)], s: &RankStream, targets: &[(f64, f64)]) {
    let n: u64 = values.iter().map(|(_, w)| w).sum();
    for &(q, e) in targets {
        let got = s.quantile(q).expect("values were given");
        let (lo, hi) = ranks_of(values, got);
        let (target, slack) = (q * n as f64, e * n as f64 + 1.0);
        assert!(
            lo <= target + slack && hi >= target - slack,
            "target {q} ± {e}: {got} holds ranks {lo}..={hi} of {n}, want {target} ± {slack} ({} tuples)",
            s.tuples.len()
        );
    }
}

/// statsd_exporter's default objectives.
const EXPORTER: [(f64, f64); 3] = [(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)];

fn order(values: &mut [(f64, u64)], how: u8) {
    match how % 3 {
        0 => {}
        1 => values.sort_by(|a, b| a.0.total_cmp(&b.0)),
        _ => values.sort_by(|a, b| b.0.total_cmp(&a.0)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn each_target_is_within_its_own_error(
        values in prop::collection::vec((0u32..5_000, 1u64..4), 1..4_000),
        targets in prop::collection::vec((1u32..100, prop::sample::select(vec![0.0, 0.001, 0.01, 0.05, 0.1])), 1..4),
        batch in 1usize..700,
        how in 0u8..3,
    ) {
        let mut values: Vec<(f64, u64)> = values.into_iter().map(|(v, w)| (f64::from(v), w)).collect();
        order(&mut values, how);
        let targets: Vec<(f64, f64)> = targets.into_iter().map(|(q, e)| (f64::from(q) / 100.0, e)).collect();
        let (_, ()) = scoped(None, || {
            let s = targeted_of(&values, &targets, batch);
            assert_targets(&values, &s, &targets);
            assert_targets(&values, &s, &targets);
        });
    }

    #[test]
    fn the_exporters_objectives_hold_with_heavy_sample_rates(
        values in prop::collection::vec((0u32..200, prop::sample::select(vec![1u64, 1, 1, 10, 100, 1_000, 10_000])), 1..2_000),
        batch in 1usize..600,
        how in 0u8..3,
    ) {
        let mut values: Vec<(f64, u64)> = values.into_iter().map(|(v, w)| (f64::from(v), w)).collect();
        order(&mut values, how);
        let (_, ()) = scoped(None, || {
            let s = targeted_of(&values, &EXPORTER, batch);
            assert_targets(&values, &s, &EXPORTER);
        });
    }
}
