//! The fleet view: the fleet-wide totals of each shared window, as the
//! last sync read them back, and the read hold the exposition takes on it.

use std::collections::{HashMap, HashSet};

use parking_lot::RwLockReadGuard;

use crate::parse::MetricKind;
use crate::store::{Unique, WindowTotals};

/// Fleet-wide totals of one window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetTotals {
    /// Weighted sum of values (counters: increments).
    pub sum: f64,
    /// Weighted number of samples.
    pub count: f64,
    /// The range and quantiles, for gauges, timers, histograms and
    /// distributions when every instance sharing the window sends them.
    pub spread: Option<FleetSpread>,
    /// Whether the range and quantiles are left out because an instance
    /// sharing the window sends none (an older rollstat).
    pub partial: bool,
    /// For sets: the distinct members over every instance, exact while
    /// every slot's union stays within the exact limit.
    pub unique: Option<Unique>,
}

/// The fleet-wide range and quantiles of one window.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetSpread {
    /// The smallest value any instance saw in the window: exact.
    pub min: f64,
    /// The largest: exact.
    pub max: f64,
    /// `(q, value)` per configured quantile (none for gauges): the
    /// DDSketch quantile of every instance's bins added up, within 1 % of a
    /// value of that rank in the union of their samples.
    pub quantiles: Vec<(f64, Option<f64>)>,
}

impl From<&WindowTotals> for FleetTotals {
    fn from(t: &WindowTotals) -> Self {
        FleetTotals {
            sum: t.sum,
            count: t.count,
            spread: None,
            partial: false,
            unique: t.unique,
        }
    }
}

impl FleetTotals {
    /// Per second over `covered` (the time the window's buckets span,
    /// [`RollingWindow::spanned`](crate::window::RollingWindow::spanned)), as
    /// `rollstat_window_rate` counts: increments for counters, samples for
    /// other types.
    #[must_use]
    pub fn rate(&self, kind: MetricKind, covered: std::time::Duration) -> f64 {
        let per = if kind == MetricKind::Counter {
            self.sum
        } else {
            self.count
        };
        crate::stats::per_second(per, covered)
    }

    /// The average value, if there were samples.
    #[must_use]
    pub fn avg(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

/// The fleet totals by series identity and window name.
#[derive(Default)]
pub(super) struct View(HashMap<u128, Vec<(String, FleetTotals)>>);

impl View {
    pub(super) fn get(&self, id: u128, window: &str) -> Option<&FleetTotals> {
        let windows = self.0.get(&id)?;
        windows.iter().find(|(w, _)| w == window).map(|(_, t)| t)
    }

    fn set(&mut self, id: u128, window: &str, t: FleetTotals) {
        let windows = self.0.entry(id).or_default();
        match windows.iter_mut().find(|(w, _)| w == window) {
            Some(slot) => slot.1 = t,
            None => windows.push((window.to_string(), t)),
        }
    }

    /// Windows whose range and quantiles are left out (see
    /// [`FleetTotals::partial`]).
    pub(super) fn partial(&self) -> usize {
        self.0
            .values()
            .flat_map(|w| w.iter())
            .filter(|(_, t)| t.partial)
            .count()
    }

    fn retain(&mut self, mut keep: impl FnMut(u128, &str) -> bool) {
        self.0.retain(|id, windows| {
            windows.retain(|(w, _)| keep(*id, w));
            !windows.is_empty()
        });
    }

    /// After a sync: the windows no longer tracked (`places` holds those
    /// that are) and those `unread` leave the view; those `read` take
    /// their new totals. Keys are the windows' Redis keys.
    pub(super) fn refresh(
        &mut self,
        places: &HashMap<String, (u128, String)>,
        read: Vec<(String, FleetTotals)>,
        unread: &[String],
    ) {
        let tracked: HashSet<(u128, &str)> =
            places.values().map(|(id, w)| (*id, w.as_str())).collect();
        let unread: HashSet<(u128, &str)> = unread
            .iter()
            .filter_map(|k| places.get(k))
            .map(|(id, w)| (*id, w.as_str()))
            .collect();
        self.retain(|id, w| tracked.contains(&(id, w)) && !unread.contains(&(id, w)));
        for (k, t) in read {
            if let Some((id, w)) = places.get(&k) {
                self.set(*id, w, t);
            }
        }
    }
}

/// A read hold on the fleet view (see
/// [`FleetWindows::view`](super::FleetWindows::view)).
pub struct FleetView<'a> {
    pub(super) totals: RwLockReadGuard<'a, View>,
}

impl FleetView<'_> {
    /// The fleet totals of the shared series `id` (its
    /// [`SeriesMeta::fleet_id`](crate::series::SeriesMeta::fleet_id)) in `window`.
    #[must_use]
    pub fn totals(&self, id: u128, window: &str) -> Option<&FleetTotals> {
        self.totals.get(id, window)
    }
}
