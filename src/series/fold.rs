//! How a measured value (an OTLP data point, [`Fold`]) updates a series:
//! the same checks as a statsd line's, in one step per value.

use super::measured::Fold;
use super::state::{
    buckets_stay_finite, observe_summary, CounterWindows, CumulativeHistogram, Folded, Overflow,
    SeriesState,
};
use crate::clock::Timestamp;
use crate::window::bucket::{Distribution, Observation};
use crate::window::Aggregate;
use crate::window::Windows;

impl SeriesState {
    /// Folds a measured value in, every value multiplied by `scale` (a
    /// mapping rule's). Checked first, changed only if every check
    /// passes, as [`apply`](Self::apply): a value that would make a stored
    /// number infinite is refused whole ([`Overflow`]). A fold of another
    /// type than the series' (the registry keys series by type, so none
    /// arrives) changes nothing.
    ///
    /// # Errors
    ///
    /// [`Overflow`], as above.
    pub fn fold(
        &mut self,
        f: &Fold<'_>,
        bounds: &[f64],
        scale: f64,
        now: Timestamp,
    ) -> Result<Folded, Overflow> {
        match (self, *f) {
            (SeriesState::Counter { windows, total }, Fold::Add(v)) => {
                add_to_counter(windows, total, v * scale, now)
            }
            (SeriesState::Gauge { windows, value }, Fold::Set(v) | Fold::Shift(v)) => {
                let v = v * scale;
                let next = if matches!(f, Fold::Shift(_)) {
                    *value + v
                } else {
                    v
                };
                if !next.is_finite() || !buckets_stay_finite(windows, now, std::iter::once(next)) {
                    return Err(Overflow);
                }
                *value = next;
                windows.add(Observation::new(next), now);
                Ok(Folded::Stored)
            }
            (SeriesState::Distribution { windows, histogram }, Fold::Aggregate(a)) => {
                add_aggregate(windows, histogram, &a.scaled(scale), bounds, now)
            }
            _ => Ok(Folded::Stored),
        }
    }
}

fn add_to_counter(
    windows: &mut CounterWindows,
    total: &mut f64,
    inc: f64,
    now: Timestamp,
) -> Result<Folded, Overflow> {
    let next = *total + inc.max(0.0);
    if !inc.is_finite() || !next.is_finite() {
        return Err(Overflow);
    }
    windows.widen_for(1.0, 1, now);
    let finite = match windows {
        CounterWindows::Unit(w) => buckets_stay_finite(w, now, std::iter::once(inc)),
        CounterWindows::Weighted(w) => buckets_stay_finite(w, now, std::iter::once(inc)),
    };
    if !finite {
        return Err(Overflow);
    }
    *total = next;
    match windows {
        CounterWindows::Unit(w) => w.add(inc, now),
        CounterWindows::Weighted(w) => w.add(Observation::new(inc), now),
    }
    Ok(if inc < 0.0 {
        Folded::NegativeIncrement
    } else {
        Folded::Stored
    })
}

fn add_aggregate(
    windows: &mut Windows<Distribution>,
    histogram: &mut CumulativeHistogram,
    a: &Aggregate,
    bounds: &[f64],
    now: Timestamp,
) -> Result<Folded, Overflow> {
    let sum = histogram.sum + a.sum;
    if !sum.is_finite() || !buckets_stay_finite(windows, now, std::iter::once(a.sum)) {
        return Err(Overflow);
    }
    for r in windows.rings_mut() {
        r.advance(now);
        r.current_mut()
            .add_aggregate(a.count, a.sum, a.min, a.max, &a.values);
    }
    // The values stand for the observations in the buckets (and in a
    // native histogram, and a summary's streams); the sum and count are
    // the ones sent.
    let (sum_before, count_before) = (histogram.sum, histogram.count);
    for &(v, w) in &a.values {
        histogram.observe(bounds, v, w);
        if let Some(s) = &mut histogram.summary {
            observe_summary(s, v, w, now);
        }
    }
    histogram.sum = sum_before + a.sum;
    histogram.count = count_before + a.count;
    histogram.saw_negative |= a.min < 0.0;
    Ok(Folded::Stored)
}

impl Aggregate {
    /// The same observations with every value multiplied by `scale`.
    fn scaled(&self, scale: f64) -> std::borrow::Cow<'_, Aggregate> {
        if scale == 1.0 {
            return std::borrow::Cow::Borrowed(self);
        }
        let (lo, hi) = (self.min * scale, self.max * scale);
        std::borrow::Cow::Owned(Aggregate {
            count: self.count,
            sum: self.sum * scale,
            min: lo.min(hi),
            max: lo.max(hi),
            values: self.values.iter().map(|&(v, w)| (v * scale, w)).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::Timestamp;
    use crate::config::Config;
    use crate::parse::{parse_datagram, Line, MetricKind};
    use crate::series::{
        Aggregate, Applied, Fold, KeyBuf, Measured, Plan, Refusal, Registry, SeriesState,
    };

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);
    const CFG: &str = "[[windows]]\nname = \"10s\"\nbuckets = 10\ninterval_ms = 1000\n";

    fn registry() -> Registry {
        Registry::new(Plan::new(Config::parse(CFG).unwrap().series_settings()), 4)
    }

    fn put(r: &Registry, kind: MetricKind, fold: Fold<'_>) -> Result<Applied, Refusal> {
        let tags = [("route", "/a".into())];
        let m = Measured {
            name: "req",
            kind,
            tags: &tags,
            fold,
        };
        r.ingest_measured(&m, T0, &mut KeyBuf::default())
    }

    fn line(r: &Registry, text: &str) {
        let Some(Ok(Line::Sample(s))) = parse_datagram(text.as_bytes()).next() else {
            panic!("bad test line {text}");
        };
        r.ingest(&s, T0, &mut KeyBuf::default()).unwrap();
    }

    /// The one series' state, read by `f`.
    fn read<T>(r: &Registry, f: impl Fn(&SeriesState) -> T) -> T {
        let mut out = None;
        r.visit(|_, s| out = Some(f(s)));
        out.expect("one series")
    }

    #[test]
    fn a_measured_counter_and_a_statsd_line_of_one_name_and_tags_meet_in_one_series() {
        let r = registry();
        put(&r, MetricKind::Counter, Fold::Add(5.0)).unwrap();
        line(&r, "req:2|c|#route:/a");
        assert_eq!(r.len(), 1);
        let total = read(&r, |s| match s {
            SeriesState::Counter { total, .. } => *total,
            _ => f64::NAN,
        });
        assert_eq!(total, 7.0);
        let v = read(&r, |s| s.window_view(0, T0, &[]));
        assert_eq!(v.sum, 7.0);
    }

    #[test]
    fn gauges_are_set_and_shifted() {
        let r = registry();
        put(&r, MetricKind::Gauge, Fold::Set(10.0)).unwrap();
        put(&r, MetricKind::Gauge, Fold::Shift(-3.0)).unwrap();
        let value = read(&r, |s| match s {
            SeriesState::Gauge { value, .. } => *value,
            _ => f64::NAN,
        });
        assert_eq!(value, 7.0);
    }

    #[test]
    fn an_aggregate_keeps_its_count_sum_and_range_and_fills_the_buckets() {
        let r = registry();
        let a = Aggregate {
            count: 4.0,
            sum: 1.3,
            min: 0.05,
            max: 0.9,
            values: vec![(0.075, 1.0), (0.5, 2.0), (0.9, 1.0)],
        };
        put(&r, MetricKind::Histogram, Fold::Aggregate(&a)).unwrap();
        let v = read(&r, |s| s.window_view(0, T0, &[0.5]));
        assert_eq!((v.samples, v.sum), (4.0, 1.3));
        assert_eq!((v.min, v.max), (Some(0.05), Some(0.9)));
        let median = v.quantiles[0].1.unwrap();
        assert!((median - 0.5).abs() < 0.01, "{median}");
        let (count, sum, buckets) = read(&r, |s| match s {
            SeriesState::Distribution { histogram, .. } => (
                histogram.count,
                histogram.sum,
                histogram.counts.iter().sum::<f64>(),
            ),
            _ => (0.0, 0.0, 0.0),
        });
        assert_eq!((count, sum, buckets), (4.0, 1.3, 4.0));
    }

    #[test]
    fn an_increment_that_would_overflow_is_refused_and_changes_nothing() {
        let r = registry();
        put(&r, MetricKind::Counter, Fold::Add(f64::MAX)).unwrap();
        assert_eq!(
            put(&r, MetricKind::Counter, Fold::Add(f64::MAX)),
            Err(Refusal::Overflow)
        );
        let total = read(&r, |s| match s {
            SeriesState::Counter { total, .. } => *total,
            _ => f64::NAN,
        });
        assert_eq!(total, f64::MAX);
    }

    #[test]
    fn a_measured_value_of_another_type_than_the_series_is_a_type_conflict() {
        let r = registry();
        put(&r, MetricKind::Counter, Fold::Add(1.0)).unwrap();
        assert_eq!(
            put(&r, MetricKind::Gauge, Fold::Set(1.0)),
            Err(Refusal::TypeConflict)
        );
    }
}
