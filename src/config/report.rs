//! What `check-config` says of a config beyond its problems: how names
//! are escaped on /metrics, which types get native histograms.

use super::Config;
use crate::parse::MetricKind;

impl Config {
    /// What `check-config` says of the names on `/metrics`.
    #[must_use]
    pub fn names_summary(&self) -> &'static str {
        if self.exporter_names {
            "names on /metrics: statsd_exporter's, escaped with underscores for every scraper ([statsd_exporter] cumulative_names)"
        } else if self.series.names_as_asked {
            "names on /metrics: as each scraper asks (Prometheus 3: UTF-8 names and tag keys as sent; set series.name_escaping = \"underscores\" to keep the sanitised ones)"
        } else {
            "names on /metrics: sanitised (underscores) for every scraper (series.name_escaping)"
        }
    }

    /// What `check-config` says of native histograms: which types get one,
    /// at which schema and bucket limit, and how many rules set their own.
    #[must_use]
    pub fn native_histograms_summary(&self) -> String {
        let n = &self.series.native_histograms;
        let own = self
            .mappings
            .iter()
            .filter(|m| m.native_bucket_factor.is_some() || m.native_max_buckets.is_some())
            .count();
        let rules = match own {
            0 => String::new(),
            1 => "; 1 mapping rule sets its own".to_string(),
            k => format!("; {k} mapping rules set their own"),
        };
        let types: Vec<&str> = MetricKind::ALL
            .into_iter()
            .filter(|k| n.types.contains(*k))
            .map(MetricKind::as_str)
            .collect();
        match crate::sketch::native::schema_for_factor(n.bucket_factor) {
            Some(schema) => format!(
                "native histograms (protobuf scrapes): {} at schema {schema} (bucket factor {}), at most {} buckets{rules}",
                types.join(", "),
                n.bucket_factor,
                n.max_buckets
            ),
            None => format!("native histograms: off (series.native_histogram_bucket_factor = 0){rules}"),
        }
    }
}
