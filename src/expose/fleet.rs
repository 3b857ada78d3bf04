//! The fleet families, `rollstat_fleet_window_{samples,sum_value,rate,avg}`:
//! the fleet view of every shared series ([`crate::fleet`]), with the same
//! labels as the local `rollstat_window_*` families ([`families`](super::families)
//! gives both their labels and builders).

use prometheus::proto::{Metric, MetricFamily, MetricType};

use super::families::{base_labels, family, gauge};
use crate::clock::Timestamp;
use crate::fleet::FleetWindows;
use crate::series::Registry;

/// Names and HELP texts, in the order [`families`] fills them.
const FLEET: [(&str, &str); 4] = [
    ("rollstat_fleet_window_samples", "Samples in the window over every instance sharing the series (fleet view through Redis)."),
    ("rollstat_fleet_window_sum_value", "Sum of values in the window over every instance sharing the series."),
    ("rollstat_fleet_window_rate", "Per second over the window, over every instance sharing the series: increments for counters, samples for other types."),
    ("rollstat_fleet_window_avg", "Average value in the window over every instance sharing the series."),
];

/// The fleet families at `now`; none while the fleet view is stale.
#[must_use]
pub fn families(fleet: &FleetWindows, registry: &Registry, now: Timestamp) -> Vec<MetricFamily> {
    let mut out: [Vec<Metric>; 4] = Default::default();
    fleet.visit(registry, now, |meta, window, t, covered| {
        let labels = base_labels(meta, window);
        out[0].push(gauge(labels.clone(), t.count));
        out[1].push(gauge(labels.clone(), t.sum));
        out[2].push(gauge(labels.clone(), t.rate(meta.kind, covered)));
        if let Some(avg) = t.avg() {
            out[3].push(gauge(labels, avg));
        }
    });
    FLEET
        .iter()
        .zip(out)
        .filter(|(_, m)| !m.is_empty())
        .map(|((name, help), m)| family(name.to_string(), help, MetricType::GAUGE, m))
        .collect()
}
