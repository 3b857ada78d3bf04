use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::sketch::rank::ranks_of;

/// The Go client's window, by brute force: every observation with its
/// time; the head at `now` holds those after its last emptying.
struct Model {
    start: u64,
    period: u64,
    len: u64,
    seen: Vec<(u64, f64, u64)>,
}

impl Model {
    fn head(&self, now: u64) -> Vec<(f64, u64)> {
        // Moves of the head due by `now`: periods ended strictly before it.
        let moves = if now <= self.start + self.period {
            0
        } else {
            (now - self.start - self.period - 1) / self.period + 1
        };
        // The head's stream was last emptied at move `moves - len + 1`.
        let emptied = (moves + 1).checked_sub(self.len).filter(|&k| k >= 1);
        let after = emptied.map_or(0, |k| self.start + k * self.period);
        self.seen
            .iter()
            .filter(|(t, _, _)| emptied.is_none() || *t > after)
            .map(|&(_, v, w)| (v, w))
            .collect()
    }
}

const QS: [f64; 5] = [0.0, 0.25, 0.5, 0.9, 0.99];

fn check(model: &Model, s: &AgedSummary, now: u64, epsilon: f64) {
    let head = model.head(now);
    let got = s.quantiles(&QS, Timestamp::from_nanos(now));
    if head.is_empty() {
        assert!(got.is_empty(), "at {now}: nothing in the head, got {got:?}");
        return;
    }
    assert_eq!(got.len(), QS.len(), "at {now}: {got:?} for {head:?}");
    let n: u64 = head.iter().map(|(_, w)| w).sum();
    for (q, v) in got {
        assert!(
            head.iter().any(|(x, _)| *x == v),
            "at {now}: q {q} answered {v}, not in the head {head:?}"
        );
        let (lo, hi) = ranks_of(&head, v);
        let (target, slack) = (q * n as f64, epsilon * n as f64 + 1.0);
        assert!(
            lo <= target + slack && hi >= target - slack,
            "at {now}: q {q} -> {v} ranks {lo}..={hi} of {n}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_head_holds_what_the_go_client_holds(
        steps in prop::collection::vec((0u64..1_500, 0u32..100, 1u64..5, any::<bool>()), 1..300),
        len in 1usize..6,
        period_ms in 1u64..2_000,
        buf_cap in 1usize..40,
        epsilon in prop::sample::select(vec![0.0, 0.0, 0.01, 0.1]),
    ) {
        let (_, ()) = crate::sketch::budget::scoped(None, || {
            let start = 1_000_000_000u64;
            let period = period_ms * 1_000_000;
            let mut s = AgedSummary::new(epsilon, len, Duration::from_nanos(period), buf_cap, Timestamp::from_nanos(start));
            let mut model = Model { start, period, len: len as u64, seen: Vec::new() };
            let mut now = start;
            for (dt_ms, v, w, read) in steps {
                now += dt_ms * 1_000_000;
                if read {
                    check(&model, &s, now, epsilon);
                } else {
                    s.observe(f64::from(v), w, Timestamp::from_nanos(now));
                    model.seen.push((now, f64::from(v), w));
                }
            }
            check(&model, &s, now, epsilon);
            check(&model, &s, now + period * len as u64 + 1, epsilon);
        });
    }
}

#[test]
fn a_value_is_seen_for_max_age_then_gone() {
    let (_, ()) = crate::sketch::budget::scoped(None, || {
        let t0 = Timestamp::from_secs(100);
        let mut s = AgedSummary::new(0.01, 5, Duration::from_secs(60), 500, t0);
        s.observe(7.0, 1, t0);
        let at = |secs| s.quantiles(&[0.5], t0 + Duration::from_secs(secs));
        assert_eq!(at(0), vec![(0.5, 7.0)], "a waiting value is read");
        assert_eq!(at(300), vec![(0.5, 7.0)], "the fifth head still has it");
        assert_eq!(at(301), vec![], "past max_age it is gone");
    });
}
