//! The windowed rates of each rule's hits, `rollstat_rls_hits_rate
//! {domain,descriptor,result,window}`: per (domain, descriptor name) one
//! set of go-zero rings ([`Windows`]) on the config's `[[windows]]`, the
//! same windows, grid and ignore-current as the series', each bucket
//! holding the five counts of `rollstat_rls_hits_total`. Read at scrape
//! time at the scrape's `now`: hits per second over the time the window
//! covers (never before the daemon started watching).
//!
//! Bounded: a name is a rule's path or one of its at most
//! `max_detailed_series` own names ([`super::detail`]), so there are at most
//! (rules x (1 + max_detailed_series)) rows, each of the windows' buckets
//! (a ring per bucket interval, sized for its longest window).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use prometheus::proto::{Metric, MetricFamily};

use crate::clock::Timestamp;
use crate::family::{gauge, pair, table as t};
use crate::series::NamedWindow;
use crate::window::bucket::Bucket;
use crate::window::{Layout, Windows};

/// The results of `rollstat_rls_hits_total`, in [`Hits`]' order.
pub const RESULTS: [&str; 5] = [
    "total_hits",
    "within_limit",
    "near_limit",
    "over_limit",
    "shadow_mode",
];

/// One bucket: the hits of each of [`RESULTS`] in its slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hits(pub [u64; 5]);

impl Bucket for Hits {
    type Input = [u64; 5];
    #[inline]
    fn add(&mut self, input: [u64; 5]) {
        for (c, n) in self.0.iter_mut().zip(input) {
            *c = c.saturating_add(n);
        }
    }
    #[inline]
    fn reset(&mut self) {
        self.0 = [0; 5];
    }
    #[inline]
    fn merge(&mut self, other: &Self) {
        self.add(other.0);
    }
}

/// The windows' shape and names.
struct Shape {
    layout: Arc<Layout>,
    windows: Vec<NamedWindow>,
    /// When each window began to be watched.
    watched: Vec<Timestamp>,
}

/// Each domain's descriptor names' windows (nested, so that a lookup
/// takes the two names as they are, allocating nothing).
type Rows = HashMap<String, HashMap<String, Mutex<Windows<Hits>>>>;

/// Every row's windows, on one shape.
pub struct HitRates {
    shape: RwLock<Shape>,
    rows: RwLock<Rows>,
}

impl HitRates {
    /// Rates on `windows`, watched from `watched` (the daemon's start).
    #[must_use]
    pub fn new(windows: &[NamedWindow], watched: Timestamp) -> HitRates {
        HitRates {
            shape: RwLock::new(Shape::new(windows.to_vec(), vec![watched; windows.len()])),
            rows: RwLock::new(HashMap::new()),
        }
    }

    /// Moves every row onto `windows` at `now` (a reload), unless they are
    /// the windows already in force: a window whose shape is unchanged
    /// keeps its buckets, a new one is watched from `now`
    /// ([`Windows::relayout`]).
    pub fn rewindow(&self, windows: &[NamedWindow], now: Timestamp) {
        let mut s = self.shape.write();
        if s.windows == windows {
            return;
        }
        let watched = windows
            .iter()
            .map(|w| match s.windows.iter().position(|old| old == w) {
                Some(i) => s.watched[i],
                None => now,
            })
            .collect();
        *s = Shape::new(windows.to_vec(), watched);
        for row in self.rows.read().values().flat_map(HashMap::values) {
            row.lock().relayout(s.layout.clone(), now);
        }
    }

    /// Adds `hits` (in [`RESULTS`]' order) to the row of `domain` and
    /// `descriptor` at `now`.
    pub fn add(&self, domain: &str, descriptor: &str, hits: [u64; 5], now: Timestamp) {
        if let Some(row) = self.rows.read().get(domain).and_then(|d| d.get(descriptor)) {
            row.lock().add(hits, now);
            return;
        }
        // The shape is held while the row is made, so that a reload's
        // rewindow (shape, then rows) never misses it.
        let shape = self.shape.read();
        self.rows
            .write()
            .entry(domain.to_string())
            .or_default()
            .entry(descriptor.to_string())
            .or_insert_with(|| Mutex::new(Windows::new(shape.layout.clone(), now)))
            .lock()
            .add(hits, now);
    }

    /// Each row's rates at `now`, `(domain, descriptor, window, per second
    /// of each of RESULTS)`.
    #[must_use]
    pub fn read(&self, now: Timestamp) -> Vec<(String, String, String, [f64; 5])> {
        let shape = self.shape.read();
        let mut out = Vec::new();
        let rows = self.rows.read();
        let all = rows
            .iter()
            .flat_map(|(domain, d)| d.iter().map(move |(name, row)| (domain, name, row)));
        for (domain, descriptor, row) in all {
            let w = row.lock();
            for (i, window) in shape
                .windows
                .iter()
                .map(|w| &w.name)
                .enumerate()
                .take(w.len())
            {
                let covered = w.covered(i, now);
                let sum = w.reduce(i, now);
                let rates = sum.0.map(|n| crate::stats::per_second(n as f64, covered));
                out.push((domain.clone(), descriptor.clone(), window.clone(), rates));
            }
        }
        out
    }

    /// `rollstat_rls_hits_rate` at `now`; none while no rule was hit.
    #[must_use]
    pub fn families(&self, now: Timestamp) -> Vec<MetricFamily> {
        let metrics: Vec<Metric> = self
            .read(now)
            .into_iter()
            .flat_map(|(domain, descriptor, window, rates)| {
                RESULTS.iter().zip(rates).map(move |(result, r)| {
                    let labels = vec![
                        pair("domain", &domain),
                        pair("descriptor", &descriptor),
                        pair("result", result),
                        pair("window", &window),
                    ];
                    gauge(labels, r)
                })
            })
            .collect();
        if metrics.is_empty() {
            return Vec::new();
        }
        vec![t::RLS_HITS_RATE.of(metrics)]
    }
}

impl Shape {
    fn new(windows: Vec<NamedWindow>, watched: Vec<Timestamp>) -> Shape {
        let layout = Layout::new(windows.iter().map(|w| w.spec).zip(watched.iter().copied()));
        Shape {
            layout: Arc::new(layout),
            windows,
            watched,
        }
    }
}

#[cfg(test)]
mod tests;
