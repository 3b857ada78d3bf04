//! What one series holds, per statsd type: its rolling windows and its
//! cumulative values, and how a sample updates them.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::parse::{GaugeOp, MetricKind, Sample};
use crate::sketch::native::NativeHistogram;
use crate::sketch::{hash_member, DistinctCounter};
use crate::stats::{Totals, WindowStats};
use crate::window::bucket::{
    Bucket, Distinct, Distribution, Observation, Summary, Tally, UnitTally,
};
use crate::window::summary::AgedSummary;
use crate::window::{Layout, Windows};

/// Per-type state of a series. Its windows share one ring per bucket
/// interval ([`Windows`]); each type's bucket holds what its families read:
/// a counter's is a 16-byte [`Tally`] (sum and count), a gauge's a
/// [`Summary`] (with min and max), a timer's a [`Distribution`] (with a
/// quantile sketch), a set's a [`Distinct`].
#[derive(Clone, Debug)]
pub enum SeriesState {
    /// Counters: windows of increments (value × weight); cumulative total.
    Counter {
        /// Every configured window.
        windows: CounterWindows,
        /// Sum of all increments since the series was born.
        total: f64,
    },
    /// Gauges: windows of the values the gauge took; current value.
    Gauge {
        /// Every configured window.
        windows: Windows<Summary>,
        /// The gauge's current value.
        value: f64,
    },
    /// Timers (in seconds), histograms, distributions: windows with a
    /// quantile sketch; a cumulative histogram.
    Distribution {
        /// Every configured window.
        windows: Windows<Distribution>,
        /// Cumulative Prometheus histogram (boxed: it would make every
        /// series' state, counters included, twice as large).
        histogram: Box<CumulativeHistogram>,
    },
    /// Sets: windows of member hashes; cumulative samples.
    Set {
        /// Every configured window.
        windows: Windows<Distinct>,
        /// Samples received since the series was born.
        samples: u64,
    },
}

/// A counter's windows: 12-byte [`UnitTally`] buckets while every line it
/// saw was unsampled (most counters, always), 16-byte weighted [`Tally`]
/// buckets from its first sampled line on, or from the line that would
/// take a bucket's count past `u32::MAX`. Moving is exact (a `u32` count is
/// an exact `f64`) and happens once.
#[derive(Clone, Debug)]
pub enum CounterWindows {
    /// Unsampled lines only.
    Unit(Windows<UnitTally>),
    /// Weighted by `1 / sample_rate`.
    Weighted(Windows<Tally>),
}

impl CounterWindows {
    fn layout(&self) -> &Arc<Layout> {
        match self {
            CounterWindows::Unit(w) => w.layout(),
            CounterWindows::Weighted(w) => w.layout(),
        }
    }

    fn relayout(&mut self, layout: Arc<Layout>, now: Timestamp) {
        match self {
            CounterWindows::Unit(w) => w.relayout(layout, now),
            CounterWindows::Weighted(w) => w.relayout(layout, now),
        }
    }

    fn spanned(&self, i: usize, now: Timestamp) -> std::time::Duration {
        match self {
            CounterWindows::Unit(w) => w.spanned(i, now),
            CounterWindows::Weighted(w) => w.spanned(i, now),
        }
    }

    /// Window `i` reduced at `now`, as weighted totals (a reduce of unit
    /// buckets is summed in `f64`: 60 full `u32` counts would overflow one).
    fn stats(&self, i: usize, now: Timestamp) -> WindowStats<Tally> {
        match self {
            CounterWindows::Unit(w) => {
                let mut merged = Tally::default();
                w.visit(i, now, |b| merged.merge(&b.widened()));
                WindowStats {
                    merged,
                    covered: w.covered(i, now),
                }
            }
            CounterWindows::Weighted(w) => WindowStats::of_shared(w, i, now),
        }
    }

    /// Moves to weighted buckets before a line of `values` increments at
    /// `weight` lands at `now`, if it needs them. Always inlined: with a
    /// second caller (`fold.rs`) the compiler stopped inlining it into
    /// `apply`, +17 instructions a counter line (callgrind,
    /// examples/ingest_profile.rs on config.toml).
    #[inline(always)]
    pub(super) fn widen_for(&mut self, weight: f64, values: u64, now: Timestamp) {
        let CounterWindows::Unit(w) = self else {
            return;
        };
        let full = |r: &mut crate::window::Ring<UnitTally>| {
            r.advance(now);
            u64::from(r.current_mut().count()) + values > u64::from(u32::MAX)
        };
        if weight != 1.0 || w.rings_mut().iter_mut().any(full) {
            *self = CounterWindows::Weighted(w.map(UnitTally::widened));
        }
    }
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
/// (resetting expired buckets, as the add that follows would). Inlined
/// for `apply`'s sake, as [`CounterWindows::widen_for`] (+30 instructions
/// a gauge line without it).
#[inline]
pub(super) fn buckets_stay_finite<B: Bucket + Totals>(
    windows: &mut Windows<B>,
    now: Timestamp,
    incs: impl Iterator<Item = f64> + Clone,
) -> bool {
    windows.rings_mut().iter_mut().all(|w| {
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
    /// A summary's window: the values of its last `max_age`, for its
    /// quantiles (`None` unless the series is published as a summary).
    pub summary: Option<Box<AgedSummary>>,
    /// The same observations in a native (exponential) histogram, served
    /// beside the classic buckets over protobuf (`None` unless its plan
    /// gives it one; boxed, so that a series without one pays 8 bytes).
    pub native: Option<Box<Native>>,
}

/// A series' native histogram and what rounding weights to whole numbers
/// has left uncounted in it (within ±0.5; see
/// [`CumulativeHistogram::observe`]).
#[derive(Clone, Debug)]
pub struct Native {
    /// The histogram.
    pub histogram: NativeHistogram,
    /// The weight not counted yet.
    pub carry: f64,
}

impl CumulativeHistogram {
    fn new(bounds: usize) -> Self {
        CumulativeHistogram {
            counts: vec![0.0; bounds + 1],
            sum: 0.0,
            count: 0.0,
            saw_negative: false,
            summary: None,
            native: None,
        }
    }

    pub(super) fn observe(&mut self, bounds: &[f64], v: f64, weight: f64) {
        let i = bounds.partition_point(|&b| b < v);
        self.counts[i] += weight;
        self.saw_negative |= v < 0.0;
        self.sum += v * weight;
        self.count += weight;
        if let Some(n) = &mut self.native {
            // Whole weights only: a native bucket's count goes out as an
            // integer, and one made by rounding a fractional sum could go
            // down between scrapes when a neighbour takes the rounding
            // (Prometheus would read a reset). So each value counts its
            // weight rounded, what rounding left carried to the next: a
            // sample rate of 0.3 (weight 3.33…) counts 3, 4, 3. The carry
            // stays within ±0.5, so the histogram's total is the weighted
            // count rounded: the `_count` the classic buckets publish.
            // Integer weights (rates 1, 0.5, 0.1, …) are counted exactly;
            // a weight is at least 1, so every value counts at least 1.
            let w = n.carry + weight;
            let whole = w.round();
            n.carry = w - whole;
            if whole >= 1.0 {
                n.histogram.observe(v, whole);
            }
        }
    }

    /// The classic histogram's weighted count as the whole number the
    /// exposition publishes (`_count` and the `+Inf` bucket).
    #[must_use]
    pub fn whole_count(&self) -> u64 {
        self.count.round() as u64
    }
}

/// A summary series' value into its streams, counted `weight` times in
/// whole counts as the quantile sketches keep them. Out of line: most
/// series have no summary, and `SeriesState::apply` stays small.
#[inline(never)]
pub(super) fn observe_summary(w: &mut AgedSummary, v: f64, weight: f64, now: Timestamp) {
    w.observe(v, weight.round().max(1.0) as u64, now);
}

impl SeriesState {
    /// Publishes the series as a summary of `spec` (empty, its streams
    /// starting now). Only timers, histograms and distributions have one;
    /// others are left alone.
    pub fn start_summary(&mut self, spec: &super::SummarySpec, now: Timestamp) {
        if let SeriesState::Distribution { histogram, .. } = self {
            histogram.summary = Some(Box::new(AgedSummary::new(
                spec.epsilon(),
                spec.window.size(),
                spec.window.interval(),
                spec.buf_cap,
                now,
            )));
        }
    }

    /// Gives the series a native histogram of `spec` (empty: it starts
    /// with the next value). Only timers, histograms and distributions
    /// have one; others are left alone.
    pub fn start_native(&mut self, spec: crate::series::NativeSpec) {
        if let SeriesState::Distribution { histogram, .. } = self {
            histogram.native = Some(Box::new(Native {
                histogram: NativeHistogram::new(spec.schema, spec.max_buckets),
                carry: 0.0,
            }));
        }
    }

    /// Drops the series' native histogram, if it has one.
    pub fn stop_native(&mut self) {
        if let SeriesState::Distribution { histogram, .. } = self {
            histogram.native = None;
        }
    }

    /// A summary's quantiles at `now` (those its window can tell: none
    /// while it holds no value), with its window's spec; `None` unless the
    /// series is a summary.
    #[must_use]
    pub fn summary_quantiles(&self, qs: &[f64], now: Timestamp) -> Option<Vec<(f64, f64)>> {
        let SeriesState::Distribution { histogram, .. } = self else {
            return None;
        };
        Some(histogram.summary.as_ref()?.quantiles(qs, now))
    }

    /// Moves the windows to `layout` (a reload changed them), keeping
    /// every cumulative value: [`Windows::relayout`].
    pub fn relayout(&mut self, layout: Arc<Layout>, now: Timestamp) {
        match self {
            SeriesState::Counter { windows, .. } => windows.relayout(layout, now),
            SeriesState::Gauge { windows, .. } => windows.relayout(layout, now),
            SeriesState::Distribution { windows, .. } => windows.relayout(layout, now),
            SeriesState::Set { windows, .. } => windows.relayout(layout, now),
        }
    }

    /// The layout of the windows.
    #[must_use]
    pub fn layout(&self) -> &Arc<Layout> {
        match self {
            SeriesState::Counter { windows, .. } => windows.layout(),
            SeriesState::Gauge { windows, .. } => windows.layout(),
            SeriesState::Distribution { windows, .. } => windows.layout(),
            SeriesState::Set { windows, .. } => windows.layout(),
        }
    }

    /// The shape of window `i`, if there is one.
    #[must_use]
    pub fn window_spec(&self, i: usize) -> Option<crate::window::WindowSpec> {
        self.layout().spec(i)
    }

    /// Empty state for a new series of `kind`, on the windows of `layout`
    /// (which says when each began to be watched: the daemon's start, or
    /// the reload that created it; a series born later reads, over the time
    /// before its birth, as having had nothing), with `buckets` cumulative
    /// histogram bounds.
    #[must_use]
    pub fn new(kind: MetricKind, layout: &Arc<Layout>, buckets: usize, now: Timestamp) -> Self {
        match kind {
            MetricKind::Counter => SeriesState::Counter {
                windows: CounterWindows::Unit(Windows::new(layout.clone(), now)),
                total: 0.0,
            },
            MetricKind::Gauge => SeriesState::Gauge {
                windows: Windows::new(layout.clone(), now),
                value: 0.0,
            },
            MetricKind::Timer | MetricKind::Histogram | MetricKind::Distribution => {
                SeriesState::Distribution {
                    windows: Windows::new(layout.clone(), now),
                    histogram: Box::new(CumulativeHistogram::new(buckets)),
                }
            }
            MetricKind::Set => SeriesState::Set {
                windows: Windows::new(layout.clone(), now),
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
    ///
    /// Every value is multiplied by `scale` first (after a timer's
    /// milliseconds become seconds): a mapping rule's `scale`, 1 otherwise.
    pub fn apply(
        &mut self,
        s: &Sample<'_>,
        bounds: &[f64],
        scale: f64,
        now: Timestamp,
    ) -> Result<Folded, Overflow> {
        let weight = s.weight();
        let values = || s.values().map(move |v| v * scale);
        match self {
            SeriesState::Counter { windows, total } => {
                let mut t = *total;
                let mut negative = false;
                for v in values() {
                    let inc = v * weight;
                    negative |= inc < 0.0;
                    t += inc.max(0.0);
                    if !inc.is_finite() || !t.is_finite() {
                        return Err(Overflow);
                    }
                }
                windows.widen_for(weight, s.values().count() as u64, now);
                let incs = values().map(|v| v * weight);
                let finite = match windows {
                    CounterWindows::Unit(w) => buckets_stay_finite(w, now, incs),
                    CounterWindows::Weighted(w) => buckets_stay_finite(w, now, incs),
                };
                if !finite {
                    return Err(Overflow);
                }
                for v in values() {
                    *total += (v * weight).max(0.0);
                    match windows {
                        CounterWindows::Unit(w) => w.add(v, now),
                        CounterWindows::Weighted(w) => w.add(Observation { value: v, weight }, now),
                    }
                }
                Ok(if negative {
                    Folded::NegativeIncrement
                } else {
                    Folded::Stored
                })
            }
            SeriesState::Gauge { windows, value } => {
                let v = s.first_value() * scale;
                let next = match s.gauge_op() {
                    Some(GaugeOp::Delta) => *value + v,
                    _ => v,
                };
                if !next.is_finite() || !buckets_stay_finite(windows, now, std::iter::once(next)) {
                    return Err(Overflow);
                }
                *value = next;
                windows.add(Observation::new(next), now);
                Ok(Folded::Stored)
            }
            SeriesState::Distribution { windows, histogram } => {
                let base = |raw: f64| s.kind.to_base_units(raw) * scale;
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
                    windows.add(Observation { value: v, weight }, now);
                    if let Some(w) = &mut histogram.summary {
                        observe_summary(w, v, weight, now);
                    }
                }
                Ok(Folded::Stored)
            }
            SeriesState::Set { windows, samples } => {
                if let Some(m) = s.set_member() {
                    *samples = samples.saturating_add(1);
                    windows.add(hash_member(m.as_bytes()), now);
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
            SeriesState::Counter {
                windows: CounterWindows::Unit(w),
                ..
            } => {
                w.visit_slots(i, now, |t, b| f(t, b.sum(), f64::from(b.count())));
            }
            SeriesState::Counter {
                windows: CounterWindows::Weighted(w),
                ..
            } => {
                w.visit_slots(i, now, |t, b| f(t, b.sum, b.count));
            }
            SeriesState::Gauge { windows, .. } => {
                windows.visit_slots(i, now, |t, b| f(t, b.sum(), b.count()));
            }
            SeriesState::Distribution { windows, .. } => {
                windows.visit_slots(i, now, |t, b| f(t, b.sum(), b.count()));
            }
            SeriesState::Set { .. } => {}
        }
    }

    /// Calls `f` with the start and contents of every bucket in window `i`
    /// at `now`, as a fleet sync shares them: totals, and for gauges,
    /// timers, histograms and distributions the range of values and (but
    /// gauges) the quantile bins; for sets the samples and the members.
    pub fn visit_shared_slots(
        &self,
        i: usize,
        now: Timestamp,
        mut f: impl FnMut(Timestamp, SharedBucket<'_>),
    ) {
        match self {
            SeriesState::Gauge { windows, .. } => windows.visit_slots(i, now, |t, b| {
                f(t, SharedBucket::of_summary(b, None));
            }),
            SeriesState::Distribution { windows, .. } => windows.visit_slots(i, now, |t, b| {
                f(t, SharedBucket::of_summary(&b.summary, Some(b)));
            }),
            SeriesState::Set { windows, .. } => windows.visit_slots(i, now, |t, b| {
                f(
                    t,
                    SharedBucket {
                        sum: 0.0,
                        count: b.samples as f64,
                        range: None,
                        values: None,
                        members: Some(&b.members),
                    },
                );
            }),
            _ => self.visit_slot_totals(i, now, |t, sum, count| {
                f(
                    t,
                    SharedBucket {
                        sum,
                        count,
                        range: None,
                        values: None,
                        members: None,
                    },
                );
            }),
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
        let spanned = match self {
            SeriesState::Counter { windows, .. } => windows.spanned(i, now),
            SeriesState::Gauge { windows, .. } => windows.spanned(i, now),
            SeriesState::Distribution { windows, .. } => windows.spanned(i, now),
            SeriesState::Set { windows, .. } => windows.spanned(i, now),
        };
        let spec = self.window_spec(i).expect("window index within the layout");
        (spec, spanned)
    }

    /// The statistics of window `i` at `now`.
    #[must_use]
    pub fn window_view(&self, i: usize, now: Timestamp, quantiles: &[f64]) -> WindowView {
        match self {
            // Counters: the rate is increments per second.
            SeriesState::Counter { windows, .. } => {
                WindowView::of(&windows.stats(i, now), true, &[])
            }
            SeriesState::Gauge { windows, .. } => {
                WindowView::of(&WindowStats::of_shared(windows, i, now), false, &[])
            }
            SeriesState::Distribution { windows, .. } => {
                WindowView::of(&WindowStats::of_shared(windows, i, now), false, quantiles)
            }
            SeriesState::Set { windows, .. } => {
                let merged = windows.reduce(i, now);
                let covered = windows.covered(i, now);
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

/// One bucket of a shared window as a fleet sync reads it
/// ([`SeriesState::visit_shared_slots`]).
#[derive(Clone, Copy, Debug)]
pub struct SharedBucket<'a> {
    /// Weighted sum of values.
    pub sum: f64,
    /// Weighted number of samples.
    pub count: f64,
    /// The smallest and largest value, for the types that keep them.
    pub range: Option<(f64, f64)>,
    /// The values, for the types with quantiles.
    pub values: Option<&'a Distribution>,
    /// The members, for sets (whose `count` is the samples, `sum` 0).
    pub members: Option<&'a DistinctCounter>,
}

impl<'a> SharedBucket<'a> {
    fn of_summary(s: &Summary, values: Option<&'a Distribution>) -> Self {
        SharedBucket {
            sum: s.sum,
            count: s.count,
            range: (!s.is_empty()).then_some((s.min, s.max)),
            values,
            members: None,
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
    fn of<B: Bucket + Totals>(s: &WindowStats<B>, sum_rate: bool, quantiles: &[f64]) -> WindowView {
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
