//! What one series holds, per statsd type: its rolling windows and its
//! cumulative values, and how a sample updates them.

use crate::clock::Timestamp;
use crate::config::NamedWindow;
use crate::parse::{GaugeOp, MetricKind, Sample};
use crate::sketch::hash_member;
use crate::stats::{Totals, WindowStats};
use crate::window::bucket::{Distinct, Distribution, Observation, Summary};
use crate::window::RollingWindow;

/// Per-type state of a series.
#[derive(Clone, Debug)]
pub enum SeriesState {
    /// Counters: windows of increments (value × weight); cumulative total.
    Counter {
        /// One per configured window.
        windows: Vec<RollingWindow<Summary>>,
        /// Sum of all increments since the series was born.
        total: f64,
    },
    /// Gauges: windows of the values the gauge took; current value.
    Gauge {
        /// One per configured window.
        windows: Vec<RollingWindow<Summary>>,
        /// The gauge's current value.
        value: f64,
    },
    /// Timers (in seconds), histograms, distributions: windows with a
    /// quantile sketch; a cumulative histogram.
    Distribution {
        /// One per configured window.
        windows: Vec<RollingWindow<Distribution>>,
        /// Cumulative Prometheus histogram (boxed: it would make every
        /// series' state, counters included, twice as large).
        histogram: Box<CumulativeHistogram>,
    },
    /// Sets: windows of member hashes; cumulative samples.
    Set {
        /// One per configured window.
        windows: Vec<RollingWindow<Distinct>>,
        /// Samples received since the series was born.
        samples: u64,
    },
}

/// A sample refused because it would make a stored number infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

/// What [`SeriesState::apply`] did with a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Folded {
    /// Folded in.
    Stored,
    /// A counter line with a negative increment: folded into the windows,
    /// left out of the cumulative total.
    NegativeIncrement,
}

/// Whether adding each of `incs` in turn to the bucket each window would
/// write at `now` keeps its sum finite. Moves the windows to `now` first
/// (resetting expired buckets, as the add that follows would).
fn buckets_stay_finite<B: crate::window::bucket::Bucket + Totals>(
    windows: &mut [RollingWindow<B>],
    now: Timestamp,
    incs: impl Iterator<Item = f64> + Clone,
) -> bool {
    windows.iter_mut().all(|w| {
        w.advance(now);
        let mut sum = w.current_mut().sum();
        incs.clone().all(|x| {
            sum += x;
            sum.is_finite()
        })
    })
}

/// A cumulative histogram with fixed upper bounds (weighted counts).
#[derive(Clone, Debug)]
pub struct CumulativeHistogram {
    /// Non-cumulative count per bucket; the last is +Inf.
    pub counts: Vec<f64>,
    /// Weighted sum of observed values.
    pub sum: f64,
    /// Weighted number of observations.
    pub count: f64,
    /// Whether a negative value was observed: then `sum` may go down, and
    /// OpenMetrics leaves it out (its `_sum` is a counter).
    pub saw_negative: bool,
}

impl CumulativeHistogram {
    fn new(bounds: usize) -> Self {
        CumulativeHistogram {
            counts: vec![0.0; bounds + 1],
            sum: 0.0,
            count: 0.0,
            saw_negative: false,
        }
    }

    fn observe(&mut self, bounds: &[f64], v: f64, weight: f64) {
        let i = bounds.partition_point(|&b| b < v);
        self.counts[i] += weight;
        self.saw_negative |= v < 0.0;
        self.sum += v * weight;
        self.count += weight;
    }
}

fn windows_for<B: crate::window::bucket::Bucket>(
    defs: &[NamedWindow],
    watched: &[Timestamp],
    ids: &[usize],
    now: Timestamp,
) -> Vec<RollingWindow<B>> {
    ids.iter()
        .map(|&i| RollingWindow::epoch_aligned(defs[i].spec, now).watched_from(watched[i]))
        .collect()
}

/// The windows for `ids`: `reuse[k]`, if set, is the index of an existing
/// window moved into place `k` (its history kept); the others are new, and
/// watched from `now`.
fn rebuild<B: crate::window::bucket::Bucket>(
    windows: &mut Vec<RollingWindow<B>>,
    defs: &[NamedWindow],
    ids: &[usize],
    reuse: &[Option<usize>],
    now: Timestamp,
) {
    let mut old: Vec<Option<RollingWindow<B>>> = windows.drain(..).map(Some).collect();
    *windows = ids
        .iter()
        .zip(reuse.iter().chain(std::iter::repeat(&None)))
        .map(|(&i, r)| {
            r.and_then(|j| old.get_mut(j)?.take()).unwrap_or_else(|| {
                RollingWindow::epoch_aligned(defs[i].spec, now).watched_from(now)
            })
        })
        .collect();
}

impl SeriesState {
    /// Replaces the windows by those of `ids` in `defs` (a reload changed
    /// them), keeping every cumulative value. `reuse[k]` names an existing
    /// window to keep, with its history, as the new window `k`; the other
    /// windows start empty at `now`.
    pub fn rewindow(
        &mut self,
        defs: &[NamedWindow],
        ids: &[usize],
        reuse: &[Option<usize>],
        now: Timestamp,
    ) {
        match self {
            SeriesState::Counter { windows, .. } | SeriesState::Gauge { windows, .. } => {
                rebuild(windows, defs, ids, reuse, now);
            }
            SeriesState::Distribution { windows, .. } => rebuild(windows, defs, ids, reuse, now),
            SeriesState::Set { windows, .. } => rebuild(windows, defs, ids, reuse, now),
        }
    }

    /// The shape of window `i`, if there is one.
    #[must_use]
    pub fn window_spec(&self, i: usize) -> Option<crate::window::WindowSpec> {
        match self {
            SeriesState::Counter { windows, .. } | SeriesState::Gauge { windows, .. } => {
                windows.get(i).map(RollingWindow::spec)
            }
            SeriesState::Distribution { windows, .. } => windows.get(i).map(RollingWindow::spec),
            SeriesState::Set { windows, .. } => windows.get(i).map(RollingWindow::spec),
        }
    }

    /// Empty state for a new series of `kind`, on windows `ids` of `defs`;
    /// `watched[i]` is when window `defs[i]` began to be watched (the
    /// daemon's start, or the reload that created it): a series born later
    /// reads, over the time before its birth, as having had nothing.
    #[must_use]
    pub fn new(
        kind: MetricKind,
        defs: &[NamedWindow],
        watched: &[Timestamp],
        ids: &[usize],
        buckets: usize,
        now: Timestamp,
    ) -> Self {
        match kind {
            MetricKind::Counter => SeriesState::Counter {
                windows: windows_for(defs, watched, ids, now),
                total: 0.0,
            },
            MetricKind::Gauge => SeriesState::Gauge {
                windows: windows_for(defs, watched, ids, now),
                value: 0.0,
            },
            MetricKind::Timer | MetricKind::Histogram | MetricKind::Distribution => {
                SeriesState::Distribution {
                    windows: windows_for(defs, watched, ids, now),
                    histogram: Box::new(CumulativeHistogram::new(buckets)),
                }
            }
            MetricKind::Set => SeriesState::Set {
                windows: windows_for(defs, watched, ids, now),
                samples: 0,
            },
        }
    }

    /// Folds one sample in. The sample's kind matches (the registry checks).
    ///
    /// Checked first, changed only if every check passes:
    ///
    /// * a sample that would make a stored number infinite (a counter's
    ///   total, a gauge's value, a histogram's sum, or the sum of the bucket
    ///   it lands in) is refused whole ([`Overflow`]); nothing changes;
    /// * a negative counter increment (statsd's `decrement`) goes into the
    ///   windows, where a sum may be negative, but never lowers the
    ///   cumulative total, which Prometheus reads as a counter that only a
    ///   reset can lower ([`Folded::NegativeIncrement`]).
    pub fn apply(
        &mut self,
        s: &Sample<'_>,
        bounds: &[f64],
        now: Timestamp,
    ) -> Result<Folded, Overflow> {
        let weight = s.weight();
        match self {
            SeriesState::Counter { windows, total } => {
                let mut t = *total;
                let mut negative = false;
                for v in s.values() {
                    let inc = v * weight;
                    negative |= inc < 0.0;
                    t += inc.max(0.0);
                    if !inc.is_finite() || !t.is_finite() {
                        return Err(Overflow);
                    }
                }
                if !buckets_stay_finite(windows, now, s.values().map(|v| v * weight)) {
                    return Err(Overflow);
                }
                for v in s.values() {
                    *total += (v * weight).max(0.0);
                    for w in windows.iter_mut() {
                        w.add(Observation { value: v, weight }, now);
                    }
                }
                Ok(if negative {
                    Folded::NegativeIncrement
                } else {
                    Folded::Stored
                })
            }
            SeriesState::Gauge { windows, value } => {
                let v = s.first_value();
                let next = match s.gauge_op() {
                    Some(GaugeOp::Delta) => *value + v,
                    _ => v,
                };
                if !next.is_finite() || !buckets_stay_finite(windows, now, std::iter::once(next)) {
                    return Err(Overflow);
                }
                *value = next;
                for w in windows.iter_mut() {
                    w.add(Observation::new(next), now);
                }
                Ok(Folded::Stored)
            }
            SeriesState::Distribution { windows, histogram } => {
                let base = |raw: f64| s.kind.to_base_units(raw);
                let mut sum = histogram.sum;
                for raw in s.values() {
                    sum += base(raw) * weight;
                    if !sum.is_finite() {
                        return Err(Overflow);
                    }
                }
                if !buckets_stay_finite(windows, now, s.values().map(|v| base(v) * weight)) {
                    return Err(Overflow);
                }
                for raw in s.values() {
                    let v = base(raw);
                    histogram.observe(bounds, v, weight);
                    for w in windows.iter_mut() {
                        w.add(Observation { value: v, weight }, now);
                    }
                }
                Ok(Folded::Stored)
            }
            SeriesState::Set { windows, samples } => {
                if let Some(m) = s.set_member() {
                    *samples = samples.saturating_add(1);
                    let h = hash_member(m.as_bytes());
                    for w in windows.iter_mut() {
                        w.add(h, now);
                    }
                }
                Ok(Folded::Stored)
            }
        }
    }

    /// Calls `f(slot_start, sum, count)` for every unexpired bucket of window
    /// `i` (newest first, the current one included): what a shared window
    /// pushes to the fleet. Sets have no summable totals and visit nothing.
    pub fn visit_slot_totals(
        &self,
        i: usize,
        now: Timestamp,
        mut f: impl FnMut(Timestamp, f64, f64),
    ) {
        match self {
            SeriesState::Counter { windows, .. } | SeriesState::Gauge { windows, .. } => {
                windows[i].visit_slots(now, |t, b| f(t, b.sum(), b.count()));
            }
            SeriesState::Distribution { windows, .. } => {
                windows[i].visit_slots(now, |t, b| f(t, b.sum(), b.count()));
            }
            SeriesState::Set { .. } => {}
        }
    }

    /// The spec of window `i` and the time its buckets span at `now`,
    /// watched or not ([`RollingWindow::spanned`]): the denominator of the
    /// fleet's rate for a shared window, whose slots other instances filled
    /// too, perhaps before this one started.
    #[must_use]
    pub fn window_shape(
        &self,
        i: usize,
        now: Timestamp,
    ) -> (crate::window::WindowSpec, std::time::Duration) {
        match self {
            SeriesState::Counter { windows, .. } | SeriesState::Gauge { windows, .. } => {
                (windows[i].spec(), windows[i].spanned(now))
            }
            SeriesState::Distribution { windows, .. } => {
                (windows[i].spec(), windows[i].spanned(now))
            }
            SeriesState::Set { windows, .. } => (windows[i].spec(), windows[i].spanned(now)),
        }
    }

    /// The statistics of window `i` at `now`.
    #[must_use]
    pub fn window_view(&self, i: usize, now: Timestamp, quantiles: &[f64]) -> WindowView {
        match self {
            // Counters: the rate is increments per second.
            SeriesState::Counter { windows, .. } => {
                WindowView::of(&WindowStats::of(&windows[i], now), true, &[])
            }
            SeriesState::Gauge { windows, .. } => {
                WindowView::of(&WindowStats::of(&windows[i], now), false, &[])
            }
            SeriesState::Distribution { windows, .. } => {
                WindowView::of(&WindowStats::of(&windows[i], now), false, quantiles)
            }
            SeriesState::Set { windows, .. } => {
                let merged = windows[i].reduce(now);
                let covered = windows[i].covered(now);
                WindowView {
                    samples: merged.samples as f64,
                    sum: 0.0,
                    rate: crate::stats::per_second(merged.samples as f64, covered),
                    avg: None,
                    min: None,
                    max: None,
                    quantiles: Vec::new(),
                    unique: Some(merged.members.count()),
                }
            }
        }
    }
}

/// One window's statistics, ready to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowView {
    /// go-zero's Count: samples in the window, weighted by sample rate.
    pub samples: f64,
    /// go-zero's Sum.
    pub sum: f64,
    /// Per second over the covered time: increments for counters, samples
    /// for every other type.
    pub rate: f64,
    /// sum / samples.
    pub avg: Option<f64>,
    /// Smallest value.
    pub min: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
    /// (q, value) for timers, histograms, distributions.
    pub quantiles: Vec<(f64, Option<f64>)>,
    /// Distinct members, for sets.
    pub unique: Option<u64>,
}

impl WindowView {
    fn of<B: crate::window::bucket::Bucket + crate::stats::Totals>(
        s: &WindowStats<B>,
        sum_rate: bool,
        quantiles: &[f64],
    ) -> WindowView {
        WindowView {
            samples: s.count(),
            sum: s.sum(),
            rate: if sum_rate { s.sum_rate() } else { s.rate() },
            avg: s.avg(),
            min: s.min(),
            max: s.max(),
            quantiles: quantiles.iter().map(|&q| (q, s.quantile(q))).collect(),
            unique: None,
        }
    }
}
