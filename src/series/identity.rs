//! A series' published identity: the Prometheus name and labels it was
//! given at birth (or by a reload), with its windows and settings.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::parse::MetricKind;

/// The published identity and settings of a series, decided at birth and
/// again by a reload ([`Registry::replan`](super::Registry::replan)).
#[derive(Clone, Debug)]
pub struct SeriesMeta {
    /// statsd type.
    pub kind: MetricKind,
    /// The statsd name after mapping: the `metric` label.
    pub metric: String,
    /// The cumulative family name (sanitised `metric`); shared with the
    /// registry's catalog.
    pub prom_name: Arc<str>,
    /// Sanitised, sorted labels (tags and mapping labels).
    pub labels: Vec<(String, String)>,
    /// Names of the windows kept, in the order of the state's windows
    /// (shared by every series on the same windows).
    pub windows: Arc<[String]>,
    /// Cumulative histogram bounds (timers, histograms, distributions).
    pub histogram_buckets: Arc<[f64]>,
    /// Whether its windows are shared with the fleet (mapping `shared`).
    pub shared: bool,
    /// When the series was born: its cumulative values count from here
    /// (OpenMetrics `_created`). A series that expires and comes back is
    /// born again, its counter restarting at 0.
    pub created: Timestamp,
}

impl SeriesMeta {
    /// The published identity, as the catalog keys it. Recomputed when the
    /// series goes rather than kept: it would cost every series a copy.
    pub(super) fn identity(&self) -> String {
        identity_of(&self.prom_name, &self.labels)
    }
}

/// Prometheus name and sorted labels, NUL-separated.
pub(super) fn identity_of(prom_name: &str, labels: &[(String, String)]) -> String {
    let mut identity = prom_name.to_string();
    for (k, v) in labels {
        identity.push('\0');
        identity.push_str(k);
        identity.push('\0');
        identity.push_str(v);
    }
    identity
}
