//! Property tests: every rolling window against a brute-force model that
//! keeps every `(t, v)` event and recomputes the window from scratch.
//!
//! The model states the semantics directly, with no ring and no offsets:
//! an event belongs to the grid slot containing its time, except that a time
//! earlier than the last-written slot counts as that slot (rollstat's
//! backward-time rule); a reduce at `now` includes the slots
//! `cur - (n-1)·I ..= cur`, where `cur` is the slot of `now` (or the
//! last-written slot if `now` is earlier), minus `cur` itself with
//! ignore-current.

use std::time::Duration;

use proptest::prelude::*;
use rollstat::sketch::{hash_member, DistinctCounter};
use rollstat::stats::WindowStats;
use rollstat::window::bucket::{Distinct, Distribution, Observation, SumCount, Summary};
use rollstat::window::{Layout, RollingWindow, WindowSpec, Windows};
use rollstat::Timestamp;

const ORIGIN: u64 = 1_767_225_600_000_000_000;

/// One step of a timeline: move time (possibly backwards), then add or reduce.
#[derive(Clone, Debug)]
enum Step {
    Add { dt: i64, v: i32 },
    Reduce { dt: i64 },
}

fn step(interval: u64, size: usize) -> impl Strategy<Value = Step> {
    let i = interval as i64;
    let span = i * size as i64;
    // Mostly small moves inside a slot, some across slots, some past the
    // whole window, a few backwards.
    let dt = prop_oneof![
        6 => 0..i / 3,
        3 => 0..2 * i,
        1 => 0..3 * span,
        1 => -2 * i..0,
        1 => Just(i),
        1 => Just(i - 1),
        1 => Just(span),
    ];
    let v = -100..1000i32;
    prop_oneof![
        3 => (dt.clone(), v).prop_map(|(dt, v)| Step::Add { dt, v }),
        1 => dt.prop_map(|dt| Step::Reduce { dt }),
    ]
}

struct Model {
    origin: u64,
    interval: u64,
    size: u64,
    ignore_current: bool,
    /// Start of the last-written slot.
    last: u64,
    events: Vec<(u64, f64)>, // (slot start, value)
}

impl Model {
    fn slot(&self, t: u64) -> u64 {
        self.origin + (t - self.origin) / self.interval * self.interval
    }
    fn add(&mut self, t: u64, v: f64) {
        let s = self.slot(t).max(self.last);
        self.last = s;
        self.events.push((s, v));
    }
    fn included(&self, now: u64) -> impl Iterator<Item = f64> + '_ {
        let cur = self.slot(now).max(self.last);
        let lo = cur.saturating_sub((self.size - 1) * self.interval);
        self.events
            .iter()
            .filter(move |(s, _)| *s >= lo && *s <= cur && !(self.ignore_current && *s == cur))
            .map(|(_, v)| *v)
    }
}

fn timeline(size: usize, interval: u64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(interval, size), 1..120)
}

/// Runs the same timeline on a window and the model, asserting at every
/// reduce (and after every add) through `check`.
fn run<B, F>(
    spec: WindowSpec,
    steps: &[Step],
    mut to_input: impl FnMut(f64) -> B::Input,
    mut check: F,
) -> Result<(), TestCaseError>
where
    B: rollstat::window::bucket::Bucket,
    F: FnMut(&RollingWindow<B>, &Model, u64) -> Result<(), TestCaseError>,
{
    let interval = spec.interval().as_nanos() as u64;
    // Start a little after the origin so that backwards steps stay above it.
    let start = ORIGIN + 10 * interval * spec.size() as u64 + 12_345;
    let mut w = RollingWindow::<B>::with_origin(
        spec,
        Timestamp::from_nanos(ORIGIN),
        Timestamp::from_nanos(start),
    );
    let mut m = Model {
        origin: ORIGIN,
        interval,
        size: spec.size() as u64,
        ignore_current: spec.ignores_current(),
        last: ORIGIN + (start - ORIGIN) / interval * interval,
        events: Vec::new(),
    };
    let mut now = start;
    for s in steps {
        let (Step::Add { dt, .. } | Step::Reduce { dt }) = s;
        now = now.saturating_add_signed(*dt).max(ORIGIN);
        let t = Timestamp::from_nanos(now);
        if let Step::Add { v, .. } = s {
            w.add(to_input(f64::from(*v)), t);
            m.add(now, f64::from(*v));
        }
        check(&w, &m, now)?;
    }
    Ok(())
}

fn spec_strategy() -> impl Strategy<Value = WindowSpec> {
    (
        1usize..12,
        prop_oneof![Just(1u64), Just(7), Just(100), Just(250_000_000)],
        any::<bool>(),
    )
        .prop_map(|(size, interval, ic)| {
            WindowSpec::new(size, Duration::from_nanos(interval))
                .unwrap()
                .ignore_current(ic)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sum_count_window_matches_the_event_log(
        (spec, steps) in spec_strategy().prop_flat_map(|s| {
            let i = s.interval().as_nanos() as u64;
            (Just(s), timeline(s.size(), i.max(3)))
        })
    ) {
        run::<SumCount, _>(spec, &steps, |v| v, |w, m, now| {
            let got = w.reduce(Timestamp::from_nanos(now));
            let want: Vec<f64> = m.included(now).collect();
            prop_assert_eq!(got.count, want.len() as u64);
            prop_assert_eq!(got.sum, want.iter().sum::<f64>());
            Ok(())
        })?;
    }

    #[test]
    fn summary_window_matches_min_max_and_weighted_sums(
        (spec, steps) in spec_strategy().prop_flat_map(|s| {
            let i = s.interval().as_nanos() as u64;
            (Just(s), timeline(s.size(), i.max(3)))
        })
    ) {
        // Weight 4 (a sample rate of 0.25) on every sample.
        run::<Summary, _>(spec, &steps, |v| Observation::sampled(v, 0.25), |w, m, now| {
            let t = Timestamp::from_nanos(now);
            let s = WindowStats::of(w, t);
            let want: Vec<f64> = m.included(now).collect();
            prop_assert_eq!(s.count(), 4.0 * want.len() as f64);
            prop_assert_eq!(s.sum(), 4.0 * want.iter().sum::<f64>());
            prop_assert_eq!(s.min(), want.iter().copied().reduce(f64::min));
            prop_assert_eq!(s.max(), want.iter().copied().reduce(f64::max));
            Ok(())
        })?;
    }

    #[test]
    fn distribution_quantiles_are_within_one_percent_of_the_exact_rank(
        steps in timeline(6, 100_000_000),
        qs in prop::collection::vec(0.0f64..=1.0, 1..5),
    ) {
        let spec = WindowSpec::new(6, Duration::from_millis(100)).unwrap();
        run::<Distribution, _>(spec, &steps, Observation::new, |w, m, now| {
            let s = WindowStats::of(w, Timestamp::from_nanos(now));
            let mut vals: Vec<f64> = m.included(now).collect();
            vals.sort_by(f64::total_cmp);
            for &q in &qs {
                match s.quantile(q) {
                    None => prop_assert!(vals.is_empty()),
                    Some(got) => {
                        // DDSketch's rank: floor(q * (count - 1)).
                        let exact = vals[(q * (vals.len() as f64 - 1.0)) as usize];
                        let tol = 0.01 * exact.abs() + 1e-9;
                        prop_assert!((got - exact).abs() <= tol, "q={} got={} exact={}", q, got, exact);
                    }
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn set_window_counts_distinct_members_exactly_while_small(
        steps in timeline(5, 1_000),
    ) {
        let spec = WindowSpec::new(5, Duration::from_nanos(1_000)).unwrap();
        run::<Distinct, _>(spec, &steps, |v| hash_member(&(v as i64).to_le_bytes()), |w, m, now| {
            let mut want: Vec<i64> = m.included(now).map(|v| v as i64).collect();
            want.sort_unstable();
            want.dedup();
            prop_assert!(want.len() <= DistinctCounter::EXACT_LIMIT);
            prop_assert_eq!(WindowStats::distinct(w, Timestamp::from_nanos(now)), want.len() as u64);
            Ok(())
        })?;
    }
}

/// Windows that share rings: 1 to 4 windows on one bucket interval (sizes
/// and ignore-current drawn separately), sometimes one more on another
/// interval.
fn shared_specs() -> impl Strategy<Value = Vec<WindowSpec>> {
    let interval = prop_oneof![Just(1u64), Just(7), Just(100), Just(250_000_000)];
    (
        interval,
        prop::collection::vec((1usize..14, any::<bool>()), 1..5),
        prop::option::of((1usize..6, any::<bool>())),
    )
        .prop_map(|(i, same, other)| {
            let mut specs: Vec<WindowSpec> = same
                .into_iter()
                .map(|(n, ic)| {
                    WindowSpec::new(n, Duration::from_nanos(i))
                        .unwrap()
                        .ignore_current(ic)
                })
                .collect();
            if let Some((n, ic)) = other {
                specs.push(
                    WindowSpec::new(n, Duration::from_nanos(i * 3))
                        .unwrap()
                        .ignore_current(ic),
                );
            }
            specs
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every window read from a shared ring is the go-zero window of its own
    /// shape: bucket for bucket (oldest first), in its covered and spanned
    /// time, in the slots it pushes to a fleet, and against the event log.
    #[test]
    fn every_window_read_from_a_shared_ring_is_its_own_go_zero_window(
        (specs, steps) in shared_specs().prop_flat_map(|specs| {
            let i = specs[0].interval().as_nanos() as u64;
            let longest = specs.iter().map(WindowSpec::size).max().unwrap();
            (Just(specs), timeline(longest, i.max(3)))
        }),
        watched_back in 0u64..1_000,
    ) {
        let interval = specs[0].interval().as_nanos() as u64;
        let longest = specs.iter().map(WindowSpec::size).max().unwrap() as u64;
        let start = ORIGIN + 10 * 3 * interval * longest + 12_345;
        let t0 = Timestamp::from_nanos(start);
        let watched = Timestamp::from_nanos(start - watched_back);
        let layout = Layout::new(specs.iter().map(|s| (*s, watched)));
        prop_assert_eq!(layout.rings(), 1 + usize::from(specs.iter().any(|s| s.interval() != specs[0].interval())));
        let mut shared = Windows::<SumCount>::new(std::sync::Arc::new(layout), t0);
        let mut alone: Vec<RollingWindow<SumCount>> = specs
            .iter()
            .map(|s| RollingWindow::epoch_aligned(*s, t0).watched_from(watched))
            .collect();
        let mut models: Vec<Model> = specs
            .iter()
            .map(|s| {
                let i = s.interval().as_nanos() as u64;
                Model {
                    origin: 0,
                    interval: i,
                    size: s.size() as u64,
                    ignore_current: s.ignores_current(),
                    last: start / i * i,
                    events: Vec::new(),
                }
            })
            .collect();
        let mut now = start;
        for s in &steps {
            let (Step::Add { dt, .. } | Step::Reduce { dt }) = s;
            now = now.saturating_add_signed(*dt).max(ORIGIN);
            let t = Timestamp::from_nanos(now);
            if let Step::Add { v, .. } = s {
                shared.add(f64::from(*v), t);
                for w in &mut alone {
                    w.add(f64::from(*v), t);
                }
                for m in &mut models {
                    m.add(now, f64::from(*v));
                }
            }
            for (i, (w, m)) in alone.iter().zip(&models).enumerate() {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                shared.visit(i, t, |x| a.push(*x));
                w.visit(t, |x| b.push(*x));
                // The shared read skips slots that ended before the watch
                // began (the standalone window visits them, empty).
                let skipped = b.len() - a.len();
                prop_assert!(b[..skipped].iter().all(|x| *x == SumCount::default()));
                prop_assert_eq!(&a[..], &b[skipped..], "window {} ({:?}) at {}", i, specs[i], now);
                let want: Vec<f64> = m.included(now).collect();
                let got = shared.reduce(i, t);
                prop_assert_eq!(got.count, want.len() as u64);
                prop_assert_eq!(got.sum, want.iter().sum::<f64>());
                prop_assert_eq!(shared.covered(i, t), w.covered(t));
                prop_assert_eq!(shared.spanned(i, t), w.spanned(t));
                let (mut a, mut b) = (Vec::new(), Vec::new());
                shared.visit_slots(i, t, |s, x| a.push((s, *x)));
                w.visit_slots(t, |s, x| b.push((s, *x)));
                prop_assert!(b[a.len()..].iter().all(|(_, x)| *x == SumCount::default()));
                prop_assert_eq!(&a[..], &b[..a.len()]);
            }
        }
    }
}
