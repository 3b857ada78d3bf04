//! The fleet families, `rollstat_fleet_window_{samples,sum_value,rate,avg,
//! min,max,quantile,unique}`: the fleet view of every shared series
//! ([`crate::fleet`]), with the same labels as the local `rollstat_window_*`
//! families ([`families`](super::families) gives both their labels and
//! builders; [`crate::family::table`] their names and HELP).

use prometheus::proto::{Metric, MetricFamily};

use super::families::{base_labels, format_q, gauge, pair, QUANTILE_LABEL};
use crate::clock::Timestamp;
use crate::family::table::FLEET;
use crate::fleet::FleetWindows;
use crate::parse::MetricKind;
use crate::series::Registry;

/// Index of `rollstat_fleet_window_quantile` in [`FLEET`].
const QUANTILE: usize = 6;
/// Index of `rollstat_fleet_window_unique`.
const UNIQUE: usize = 7;

/// The fleet families at `now`; none while the fleet view is stale.
#[must_use]
pub fn families(fleet: &FleetWindows, registry: &Registry, now: Timestamp) -> Vec<MetricFamily> {
    let mut out: [Vec<Metric>; 8] = Default::default();
    fleet.visit(registry, now, |meta, window, t, covered| {
        let labels = base_labels(meta, window);
        out[0].push(gauge(labels.clone(), t.count));
        if meta.kind == MetricKind::Set {
            // Samples, rate and distinct members, as its local windows show.
            out[2].push(gauge(labels.clone(), t.rate(meta.kind, covered)));
            if let Some(u) = t.unique {
                out[UNIQUE].push(gauge(labels, u.count as f64));
            }
            return;
        }
        out[1].push(gauge(labels.clone(), t.sum));
        out[2].push(gauge(labels.clone(), t.rate(meta.kind, covered)));
        if let Some(avg) = t.avg() {
            out[3].push(gauge(labels.clone(), avg));
        }
        let Some(spread) = &t.spread else {
            return;
        };
        for (i, x) in [(4, spread.min), (5, spread.max)] {
            if x.is_finite() {
                out[i].push(gauge(labels.clone(), x));
            }
        }
        for &(q, x) in &spread.quantiles {
            if let Some(x) = x.filter(|x| x.is_finite()) {
                let mut l = labels.clone();
                l.push(pair(QUANTILE_LABEL, &format_q(q)));
                out[QUANTILE].push(gauge(l, x));
            }
        }
    });
    FLEET
        .iter()
        .zip(out)
        .filter(|(_, m)| !m.is_empty())
        .map(|(f, m)| f.of(m))
        .collect()
}
