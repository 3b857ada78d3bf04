//! A series' published identity: the Prometheus name and labels it was
//! given at birth (or by a reload), with its windows and settings.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::parse::MetricKind;

/// The published identity and settings of a series, decided at birth and
/// again by a reload ([`Registry::replan`](super::Registry::replan)).
///
/// `repr(C)`, hot fields first: ingest reads `kind`, `scale` and
/// `histogram_buckets` of every line's series, and they share its first
/// cache line (the compiler's own order put them on different lines, one
/// more cache miss per line).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct SeriesMeta {
    /// statsd type.
    pub kind: MetricKind,
    /// Every value is multiplied by this (a mapping rule's `scale`, after
    /// a timer's milliseconds become seconds); 1 otherwise.
    pub scale: f64,
    /// Cumulative histogram bounds (timers, histograms, distributions):
    /// the mapping rule's, else `[series] histogram_buckets`.
    pub histogram_buckets: Arc<[f64]>,
    /// The statsd name after mapping: the `metric` label.
    pub metric: String,
    /// The cumulative family name (sanitised `metric`); shared with the
    /// registry's catalog.
    pub prom_name: Arc<str>,
    /// Sanitised, sorted labels (tags and mapping labels).
    pub labels: Vec<(String, String)>,
    /// The name each of `labels` was sent as (a tag key such as
    /// `http.method`), by the same index; `None` when every one is its
    /// sanitised name (most series: one pointer, no allocation). Published
    /// where a scraper takes UTF-8 names. A mapping label, and a key that
    /// could shadow one of rollstat's labels, keeps its sanitised name.
    pub sent_label_names: Option<Box<super::SentNames>>,
    /// Names of the windows kept, in the order of the state's windows
    /// (shared by every series on the same windows).
    pub windows: Arc<[String]>,
    /// The mapping rule's own expiry (zero: never), else `None`: the
    /// registry's `[series] ttl_secs`.
    pub ttl: Option<std::time::Duration>,
    /// The HELP text of its cumulative family (a mapping rule's `help`),
    /// else rollstat's own.
    pub help: Option<Arc<str>>,
    /// A counter published under its name as it is (`prom_name`, no
    /// `_total` added), as statsd_exporter publishes it (`[statsd_exporter]
    /// cumulative_names = "statsd_exporter"` and a name not ending in
    /// `_total`).
    pub counter_as_is: bool,
    /// Published as a Prometheus summary (a mapping rule's `observer =
    /// "summary"`): its quantiles and the window they are read over.
    pub summary: Option<Arc<super::SummarySpec>>,
    /// Whether its windows are shared with the fleet (mapping `shared`).
    pub shared: bool,
    /// Its published identity as a number ([`fleet_hash`] of its Prometheus
    /// name and labels), computed once at birth: the registry's catalog
    /// keeps these rather than the identity's text, and a shared series is
    /// known by it across instances ([`fleet_id`](Self::fleet_id)).
    pub id: u128,
    /// When the series was born: its cumulative values count from here
    /// (OpenMetrics `_created`). A series that expires and comes back is
    /// born again, its counter restarting at 0.
    pub created: Timestamp,
}

impl SeriesMeta {
    /// Sets whether the series is shared.
    pub(super) fn set_shared(&mut self, shared: bool) {
        self.shared = shared;
    }

    /// The identity of a shared series across instances ([`fleet_hash`] of
    /// its Prometheus name and labels); `None` when it is not shared.
    #[must_use]
    pub fn fleet_id(&self) -> Option<u128> {
        self.shared.then_some(self.id)
    }
}

/// The identity of a series across instances and versions: xxh3-128 (seed
/// 0) of its Prometheus name and sorted labels, each part preceded by its
/// length (8 bytes, little endian) so that no two label sets encode alike.
/// Stable: xxh3 is a specified hash (the same on every platform and
/// version of the crate), and this encoding must never change (shared
/// windows' Redis keys are named by it; a unit test pins a value).
#[must_use]
pub fn fleet_hash(prom_name: &str, labels: &[(String, String)]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3Default::new();
    let mut part = |b: &[u8]| {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    };
    part(prom_name.as_bytes());
    for (k, v) in labels {
        part(k.as_bytes());
        part(v.as_bytes());
    }
    h.digest128()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_fleet_hash_is_pinned_and_tells_label_sets_apart() {
        // xxh3-128 itself, against the reference vector of the empty input.
        assert_eq!(
            xxhash_rust::xxh3::xxh3_128(b""),
            0x99aa_06d3_0147_98d8_6001_c324_468d_497f
        );
        // Shared windows' Redis keys are named by this value: it must never
        // change between versions or instances.
        let id = fleet_hash("api_requests", &labels(&[("host", "a"), ("route", "/x")]));
        assert_eq!(format!("{id:032x}"), "fa5a8d4c22f9f5739cab8ff14fcf7bb8");
        // Parts are length-prefixed: moving a byte between parts changes it.
        assert_ne!(
            fleet_hash("a", &labels(&[("bc", "d")])),
            fleet_hash("a", &labels(&[("b", "cd")]))
        );
        assert_ne!(
            fleet_hash("ab", &[]),
            fleet_hash("a", &labels(&[("b", "")]))
        );
    }
}
